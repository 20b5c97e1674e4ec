"""How quickly the interactive app is useful: import, first frame, the demo diagnosed on screen, and a
language switch, measured headless with ``App.run_test`` (what a user waits for, minus the terminal).

Each repeat runs in a fresh Python process, so imports and the rule set's first load are paid every time
as they are when a user types ``oomdoctor demo``. Prints the median and the range over the repeats.

    python benchmarks/bench_tui.py [--repeats 5] [--size 100x30]

Figures (milliseconds, from the start of the process's measurement):
- import factory: ``import oomdoctor.tui.factory`` (what ``oomdoctor`` imports before it knows the verb's
  needs; textual is not imported yet).
- import app: ``import oomdoctor.tui.app`` on top of it (textual and the screens).
- first frame: ``build_app(demo=True)`` until ``run_test`` hands over a mounted, drawn main screen.
- demo diagnosed: from the same start until the OOM banner and the first proposal are on screen.
- lang switch body / footer: the ``l`` key event until the proposal, then the footer, read in the other
  language (Textual rebuilds the footer when the app next goes idle, after the body is drawn).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

FIGURES = (
    "import_factory_ms",
    "import_app_ms",
    "first_frame_ms",
    "demo_diagnosed_ms",
    "lang_switch_body_ms",
    "lang_switch_footer_ms",
)


async def _wait_for(pilot: Any, ready: Any, timeout_s: float = 60.0) -> None:
    """Poll what is on screen every few milliseconds (each look renders the screen: a few ms of error)."""
    deadline = time.perf_counter() + timeout_s
    while not ready():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there in time")
        await pilot.pause(0.002)


def _screen_text(app: Any) -> str:
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), color_system=None, record=True)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def one_run(size: tuple[int, int]) -> dict[str, float]:
    """One cold measurement (run in its own process by ``main``)."""
    import asyncio

    t0 = time.perf_counter()
    from oomdoctor.tui.factory import build_app

    t_factory = time.perf_counter()
    import oomdoctor.tui.app  # noqa: F401

    t_app = time.perf_counter()
    from textual import events

    from oomdoctor.facts.gpu import FakeGpuSource
    from oomdoctor.tui.strings import t

    figures: dict[str, float] = {
        "import_factory_ms": (t_factory - t0) * 1000,
        "import_app_ms": (t_app - t_factory) * 1000,
    }

    async def drive() -> None:
        # A scripted "no GPU" source: NVML start-up time is the machine's, not the app's.
        start = time.perf_counter()
        app = build_app(
            lang="en", demo=True, gpu_source=FakeGpuSource.unavailable(), trial_launcher=lambda **k: None
        )
        async with app.run_test(size=size) as pilot:
            figures["first_frame_ms"] = (time.perf_counter() - start) * 1000

            def header(lang: str) -> str:
                return t("proposal_header", lang, index=1, count=len(app.session.proposals))  # type: ignore[arg-type]

            def diagnosed() -> bool:
                return app.session.diagnosis is not None and header("en") in _screen_text(app)

            await _wait_for(pilot, diagnosed)
            figures["demo_diagnosed_ms"] = (time.perf_counter() - start) * 1000
            await pilot.pause()  # the user presses l once the app has settled
            # The key as the terminal driver delivers it (Pilot.press also waits for the whole process to
            # idle, which measures the machine's load rather than the app).
            key = events.Key("l", "l")
            key.set_sender(app)
            switch = time.perf_counter()
            app._driver.send_message(key)

            await _wait_for(pilot, lambda: header("zh") in _screen_text(app))
            figures["lang_switch_body_ms"] = (time.perf_counter() - switch) * 1000
            await _wait_for(pilot, lambda: t("key_quit", "zh") in _screen_text(app))
            figures["lang_switch_footer_ms"] = (time.perf_counter() - switch) * 1000

    asyncio.run(drive())
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", default="100x30", help="terminal size, COLSxROWS (default 100x30)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cols, rows = (int(n) for n in args.size.lower().split("x"))
    if args.one:
        print(json.dumps(one_run((cols, rows))))
        return 0
    runs = []
    for _ in range(args.repeats):
        out = subprocess.run(
            [sys.executable, __file__, "--one", "--size", args.size],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(
        f"oomdoctor TUI, headless run_test at {cols}x{rows}, {args.repeats} cold processes (median [min-max])"
    )
    for name in FIGURES:
        values = [r[name] for r in runs]
        label = name.removesuffix("_ms").replace("_", " ")
        print(f"  {label:<18} {statistics.median(values):8.1f} ms   [{min(values):.1f}-{max(values):.1f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
