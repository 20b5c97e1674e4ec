"""Watch mode: ``oomdoctor`` on a config that a running process names opens the watch screen; its chart,
status and warnings follow the run; when the process ends the screen shows the diagnosis of the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from functional.tui_helpers import OOM_LOG_TEXT
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.watch_screen import MemoryPlot, WatchScreen


async def _wait_for(pilot, condition, tries: int = 100) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition never held")


async def test_a_live_run_opens_watch_mode_and_ends_in_its_diagnosis(
    user_dir: Path, gpu_source: FakeGpuSource
) -> None:
    config = user_dir / "configs" / "qwen3_lora.yaml"
    log = user_dir / "qwen3_lora.log"
    # a stand-in training: a real process whose command line names the config (the watcher never signals it)
    run = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(60)", str(config)])
    try:
        app = build_app(config, log, lang="en", gpu_source=gpu_source, scan_at_start=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await _wait_for(pilot, lambda: isinstance(app.screen, WatchScreen))
            screen = app.screen
            assert isinstance(screen, WatchScreen)
            screen.interval_s = 0.1
            await _wait_for(pilot, lambda: str(run.pid) in str(screen.query_one("#watch-status").render()))
            assert screen.frame is not None and screen.frame["alive"]
            await _wait_for(pilot, lambda: bool(list(screen.query(MemoryPlot))))
            run.kill()
            run.wait()
            await _wait_for(pilot, lambda: screen.frame is not None and screen.frame["ended"], tries=200)
            await pilot.pause(0.1)
            text = str(screen.query_one("#watch-diagnosis").render())
            assert "The run has ended" in text and screen.final is not None and screen.final.oom
            await pilot.press("d")
            await _wait_for(pilot, lambda: not isinstance(app.screen, WatchScreen))
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert "CUDA out of memory" in OOM_LOG_TEXT  # the log the diagnosis read


async def test_a_finished_run_opens_the_diagnosis_as_before(
    user_dir: Path, gpu_source: FakeGpuSource
) -> None:
    app = build_app(user_dir / "configs" / "qwen3_lora.yaml", user_dir / "qwen3_lora.log", lang="en",
                    gpu_source=gpu_source, scan_at_start=False)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        assert not any(isinstance(s, WatchScreen) for s in app.screen_stack)


async def test_a_log_still_being_written_opens_watch_mode_from_the_log_alone(
    user_dir: Path, gpu_source: FakeGpuSource
) -> None:
    """No process names the config (a run in another container): its log was written a moment ago and shows no
    end, so `oomdoctor` watches it from the log; the chart holds the estimate's lines; the end -> the diagnosis."""
    config = user_dir / "configs" / "qwen3_lora.yaml"
    log = user_dir / "qwen3_lora.log"
    running, failure = OOM_LOG_TEXT.rsplit("torch.OutOfMemoryError", 1)
    log.write_text(running + " 10%|#  | 4/150 [00:08<04:52,  2.0s/it]\n", encoding="utf-8")
    app = build_app(config, log, lang="en", gpu_source=gpu_source, scan_at_start=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait_for(pilot, lambda: isinstance(app.screen, WatchScreen))
        screen = app.screen
        assert isinstance(screen, WatchScreen)
        screen.interval_s = 0.1
        await _wait_for(
            pilot, lambda: "Following the log alone" in str(screen.query_one("#watch-status").render())
        )
        status = str(screen.query_one("#watch-status").render())
        assert "step 4 / 150" in status and "no process memory" in status
        await _wait_for(pilot, lambda: bool(list(screen.query(MemoryPlot))))
        [plot] = list(screen.query(MemoryPlot))
        assert plot.pool_name == "estimate" and {"eval", "longest_batch"} <= set(plot.pool["phase_lines_mib"])
        assert "No warning can be judged" in str(screen.query_one("#watch-warnings-text").render())
        with open(log, "a", encoding="utf-8") as fh:
            fh.write("torch.OutOfMemoryError" + failure)
        await _wait_for(pilot, lambda: screen.frame is not None and screen.frame["ended"], tries=200)
        await pilot.pause(0.1)
        assert "The run has ended" in str(screen.query_one("#watch-diagnosis").render())
        assert screen.final is not None and screen.final.oom
