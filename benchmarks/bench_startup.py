"""Start-up cost of whole `oomdoctor ...` processes on the bundled demo case, as ratios to the bare interpreter
measured in the same run, and which heavy modules each one imported (none should).

    python benchmarks/bench_startup.py [--repeats 9] [--against OTHER/src [--against-only]]

As a user meets it: bytecode compiled (the script compiles the package first and lets its children write
bytecode even when PYTHONDONTWRITEBYTECODE is set), the user cache warm (one untimed run first: the rule files
validated once and kept, see oomdoctor/rules/compiled.py, and the config's parse). The cold first start after
an edit of a rule file is printed too. Targets (issue 12): the headless verbs within 8x `python -c pass`; the
app's first frame within 2x `python -c "import textual.app"` (timed until the app says its first frame is
drawn; the whole process, which at exit waits for the diagnosis started at mount, is printed too). Each command
runs alternated with its baseline, so a load that comes and goes weighs on both; "cpu x bare" is the same ratio
in CPU time (user + system), which a loaded machine moves less than the wall time. ``--against OTHER/src``
(another checkout's source folder, e.g. a ``git archive`` of main) also times each headless verb with that tree
and with this one, runs of the two and of the bare interpreter interleaved in the same minutes: the least CPU
time of each (a start's own cost; a load only ever adds to it), its multiple of the bare interpreter's least,
and the medians. ``--against-only`` prints that comparison alone.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "keywords_clean_train.yaml"
LOG = ROOT / "configs" / "demo" / "train.log"
LENGTHS = ROOT / "configs" / "demo" / "lengths.json"
HEAVY = ("torch", "transformers", "datasets", "llamafactory", "textual", "pydantic", "yaml")

BARE = ["-c", "pass"]
BARE_TEXTUAL = ["-c", "import textual.app"]
DIAGNOSE = ["-m", "oomdoctor.cli", "diagnose", "--config", str(CONFIG), "--log", str(LOG), "--json"]
# What the installed `oomdoctor` script runs (pip's console-script wrapper): no runpy, unlike `python -m`.
CONSOLE_SCRIPT = "import re, sys; from oomdoctor.cli import main; sys.exit(main())"
COMMANDS = {
    "oomdoctor --help": ["-m", "oomdoctor.cli", "--help"],
    "oomdoctor diagnose --json": DIAGNOSE,
    "diagnose --json, as the installed script": ["-c", CONSOLE_SCRIPT, *DIAGNOSE[2:]],
    "oomdoctor diagnose --lengths (text)": [
        *DIAGNOSE[:-1], "--lengths", str(LENGTHS),
    ],  # fmt: skip
    "oomdoctor estimate --json": [
        "-m", "oomdoctor.cli", "estimate", "--config", str(CONFIG), "--gpu", "V100-32GB", "--json",
    ],  # fmt: skip
}

# The app until its first frame is drawn (headless, the demo case, no GPU), then out.
FIRST_FRAME = """
import asyncio
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.tui.factory import build_app

async def main():
    app = build_app(lang="en", demo=True, gpu_source=FakeGpuSource.unavailable(), trial_launcher=lambda **k: None)
    async with app.run_test(size=(100, 30)):
        print("FIRST-FRAME", flush=True)

asyncio.run(main())
"""

PROBE = """
import runpy, sys, json
sys.argv = ["oomdoctor"] + sys.argv[1:]
try:
    runpy.run_module("oomdoctor.cli", run_name="__main__")
except SystemExit:
    pass
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(__HEAVY_LIST__)))
sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
"""


def _env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = cache
    return env


def run_s(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def wall_s(args: list[str], env: dict[str, str]) -> float:
    return run_s(args, env)[0]


Sample = tuple[float, float]


def paired(measure: Callable[[], Sample], baseline: Callable[[], Sample], repeats: int) -> tuple[list[Sample], list[Sample]]:
    """Runs of a command and of its baseline, alternated (after one untimed run of each, which warms the file
    cache, the bytecode and the user cache): a load that comes and goes on a shared machine weighs on both."""
    measure(), baseline()
    pairs = [(measure(), baseline()) for _ in range(repeats)]
    return [m for m, _ in pairs], [b for _, b in pairs]


def ratios(runs: list[Sample], base: list[Sample]) -> tuple[float, float, float]:
    """The command's median wall ms, and its wall and CPU medians as multiples of the baseline's."""
    wall, cpu = (statistics.median(x[i] for x in runs) for i in (0, 1))
    base_wall, base_cpu = (statistics.median(x[i] for x in base) for i in (0, 1))
    return wall * 1000, wall / base_wall, cpu / base_cpu


def until_line_s(args: list[str], env: dict[str, str], line: str) -> float:
    """Seconds from starting the process until it prints ``line`` (then it is left to finish on its own: the
    app's teardown, and the diagnosis worker it waits for, come after the frame the user sees)."""
    start = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        for out in proc.stdout:
            if out.strip() == line:
                break
        seen = time.perf_counter() - start
        proc.communicate()
    return seen


def heavy_modules(args: list[str], env: dict[str, str]) -> list[str]:
    if args[:2] == ["-c", CONSOLE_SCRIPT]:
        args = ["-m", "oomdoctor.cli", *args[2:]]
    if args[:1] != ["-m"]:
        return []
    code = PROBE.replace("__HEAVY_LIST__", repr(json.dumps(HEAVY)))
    out = subprocess.run([sys.executable, "-c", code, *args[2:]], capture_output=True, text=True, check=False, env=env)
    for line in out.stderr.splitlines():
        if line.startswith("HEAVY="):
            return json.loads(line[6:])
    return ["?"]


def cold_ms(args: list[str], env: dict[str, str], repeats: int) -> float:
    """A start with an empty user cache (the first after installing or editing a rule file)."""
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            times.append(wall_s(args, {**env, "XDG_CACHE_HOME": cache}))
    return statistics.median(times) * 1000


def against(other_src: str, env: dict[str, str], repeats: int) -> None:
    """Each headless verb's CPU ms with ``other_src`` and with this tree, interleaved with the bare interpreter."""
    with tempfile.TemporaryDirectory() as cache:
        other = {**env, "PYTHONPATH": other_src, "XDG_CACHE_HOME": cache}
        print(f"{'cpu ms: other tree -> this tree':40} {'least':>17} {'x bare (least)':>15} {'median':>17}")
        bare_all: list[float] = []
        for name, argv in COMMANDS.items():
            run_s(argv, env), run_s(argv, other)  # warm both trees' bytecode and user caches
            trios = [(run_s(argv, other)[1], run_s(argv, env)[1], run_s(BARE, env)[1]) for _ in range(repeats)]
            theirs, mine, bare = (sorted(x[i] * 1000 for x in trios) for i in range(3))
            bare_all += bare
            least = f"{theirs[0]:6.1f} -> {mine[0]:6.1f}"
            times = f"{theirs[0] / bare[0]:5.1f} -> {mine[0] / bare[0]:4.1f}"
            median = f"{statistics.median(theirs):6.1f} -> {statistics.median(mine):6.1f}"
            print(f"{name:40} {least:>17} {times:>15} {median:>17}")
        label = "python -c pass (least, median)"
        print(f"{label:40} {min(bare_all):17.1f} {'':15} {statistics.median(bare_all):17.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--against", metavar="OTHER_SRC", help="another checkout's src folder to compare with")
    parser.add_argument("--against-only", action="store_true", help="print only the --against comparison")
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "src" / "oomdoctor"), quiet=1)
    if args.against:
        compileall.compile_dir(args.against, quiet=1)
    if args.against and args.against_only:
        with tempfile.TemporaryDirectory() as cache:
            against(args.against, _env(cache), args.repeats)
        return
    with tempfile.TemporaryDirectory() as cache:
        env = _env(cache)
        bare_runs: list[Sample] = []
        rows = []
        for name, argv in COMMANDS.items():
            runs, base = paired(lambda a=argv: run_s(a, env), lambda: run_s(BARE, env), args.repeats)
            bare_runs += base
            rows.append((name, *ratios(runs, base), heavy_modules(argv, env)))
        bare = statistics.median(x[0] for x in bare_runs) * 1000
        print(f"{'command':40} {'median':>9} {'x bare':>7} {'cpu x bare':>11}  heavy modules imported")
        print(f"{'python -c pass (interpreter alone)':40} {bare:6.0f} ms {1.0:6.1f}x {1.0:10.1f}x")
        for name, ms, wall_x, cpu_x, heavy in rows:
            print(f"{name:40} {ms:6.0f} ms {wall_x:6.1f}x {cpu_x:10.1f}x  {', '.join(heavy) or 'none'}")
        cold = cold_ms(DIAGNOSE, env, max(3, args.repeats // 3))
        print(f"{'diagnose --json, empty user cache':40} {cold:6.0f} ms {cold / bare:6.1f}x  (validates the rules once)")
        textual = lambda: run_s(BARE_TEXTUAL, env)  # noqa: E731
        frames, base = paired(lambda: (until_line_s(["-c", FIRST_FRAME], env, "FIRST-FRAME"), 0.0), textual, args.repeats)
        wholes, base_whole = paired(lambda: run_s(["-c", FIRST_FRAME], env), textual, args.repeats)
        textual_ms = statistics.median(x[0] for x in base + base_whole) * 1000
        frame_ms, frame_x, _ = ratios(frames, base)
        whole_ms, whole_x, _ = ratios(wholes, base_whole)
        label = 'python -c "import textual.app"'
        print(f"{label:40} {textual_ms:6.0f} ms")
        print(f"{'the app: until its first frame':40} {frame_ms:6.0f} ms {frame_x:6.1f}x import textual.app")
        print(f"{'the app: first frame, whole process':40} {whole_ms:6.0f} ms {whole_x:6.1f}x  (its exit waits for the diagnosis worker)")
        if args.against:
            print()
            against(args.against, env, args.repeats)


if __name__ == "__main__":
    main()
