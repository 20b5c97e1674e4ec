"""Apply, then a short trial: live panels, Stop, the result and comparison, and back to proposals."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from functional.tui_helpers import (
    ScriptedTrial,
    apply_and_start_trial,
    fixed_clock,
    screen_text,
)
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import MainScreen
from oomdoctor.tui.trial_screen import TrialScreen

FAKE_LAUNCHER = Path(__file__).resolve().parent.parent / "fixtures" / "fake_launcher.py"


def _unique(messages: Any) -> list[Any]:
    return list({id(m): m for m in messages}.values())


async def test_trial_shows_live_memory_then_result_and_goes_back(user_dir: Path, gpu_source: Any) -> None:
    launcher = ScriptedTrial(outcome="oom")
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False, trial_steps=5)  # fmt: skip
    messages: list[Any] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        assert isinstance(app.screen, TrialScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
        assert "Short trial of trials/01-halve_micro_batch-trial" in text
        assert "Finished: trial ran out of memory, peak 17.97 GiB, 42 s" in text
        assert "press d to diagnose this trial" in text
        assert "CUDA out of memory. Tried to allocate 1.16 GiB" in text  # the log tail
        assert "d Proposals" in text and "s Stop" not in text
        entry = app.session.history[0]
        assert entry.outcome == "oom" and entry.peak_mib == 18400.0
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        await pilot.press("h")
        await pilot.pause()
        await pilot.pause()
        history = screen_text(app)
        assert "01-halve_micro_batch" in history and "trial ran out of memory" in history  # 80: blocks
    [call] = launcher.calls
    assert call["config_path"] == user_dir / "trials/01-halve_micro_batch/config.yaml"
    assert call["out_dir"] == user_dir / "trials/01-halve_micro_batch-trial" and call["steps"] == 5
    kinds = {type(m).__name__ for m in _unique(messages)}
    assert {"PatchWritten", "TrialSampled", "TrialLogGrew", "TrialFinished"} <= kinds
    finished = [m for m in _unique(messages) if isinstance(m, OomDoctorApp.TrialFinished)]
    assert [row.name for row in finished[0].comparison.rows] == ["01-halve_micro_batch-trial"]


async def test_samples_are_coalesced_not_queued(user_dir: Path, gpu_source: Any) -> None:
    """Five samples arrive at once; the screen may handle fewer messages but draws every sample."""
    launcher = ScriptedTrial(outcome="ok", wait_for_stop=True)
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        assert launcher.started.wait(10)
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TrialScreen)
        chart = screen.query_one("#trial-memory")
        assert chart.series["0"][1] == [v / 1024 for v in (1200.0, 9800.0, 17600.0, 18400.0, 18100.0)]
        assert chart.limit_gib == 32.0  # drawn in GiB against the card's total
        assert chart.estimate_gib == 18400.0 / 1024  # the proposal's estimated peak after the change
        assert chart.peak_gib == 18400.0 / 1024
        text = screen_text(app)
        assert "Memory 17.68 GiB of 32.00 GiB" in text
        assert "card limit" in text and "Estimate 17.97 GiB" in text  # the legend beside the chart
        assert "Step 3 of 50" in text  # the default short trial, as `oomdoctor trial`
        assert "about 63 s left" in text  # 4 s for 3 steps, 47 to go
        assert "s Stop" in text
        await pilot.press("s")  # stop: the trial's own process group only
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.trial_stop is not None and app.trial_stop.is_set()
        assert "Finished: trial stopped" in screen_text(app)
        assert app.session.history[0].outcome == "stopped"


async def test_failed_trial_goes_back_to_proposals_and_the_next_change_compares(
    user_dir: Path, gpu_source: Any
) -> None:
    """The course's loop: change, try, still fails, diagnose the trial, change again, compare the two."""
    launcher = ScriptedTrial(outcome="oom")
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    messages: list[Any] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        change = user_dir / "trials/01-halve_micro_batch"
        trial = user_dir / "trials/01-halve_micro_batch-trial"
        # diagnosed from the trial's log, with the config it was made from (not the trial's step limits)
        assert app.session.config == change / "config.yaml"
        assert app.session.log == trial / "train.log"
        assert app.session.trial_parent() == str(trial)
        text = screen_text(app)
        assert "config: trials/01-halve_micro_batch/config.yaml" in text
        assert "trials/01-halve_micro_batch-trial/train.log" in text
        proposal = app.session.current_proposal
        assert proposal is not None and proposal.changes
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        second = app.session.history[1]
        assert second.folder.name.startswith("02-") and second.parent == str(trial)
        assert json.loads((second.folder / "change.json").read_text(encoding="utf-8"))["parent"] == str(trial)
        await pilot.press("t", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        finished = [m for m in _unique(messages) if isinstance(m, OomDoctorApp.TrialFinished)]
        names = [row.name for row in finished[-1].comparison.rows]
        assert names == ["01-halve_micro_batch-trial", f"{second.folder.name}-trial"]
        assert "Trials compared" in screen_text(app)


async def test_real_trial_runner_with_a_stand_in_for_llamafactory(user_dir: Path, gpu_source: Any) -> None:
    """The real ``run_trial`` (process group, sampler, result.json) launching the fake llamafactory-cli."""
    from oomdoctor.trial.runner import run_trial

    launcher = functools.partial(
        run_trial, launcher=f"{sys.executable} {FAKE_LAUNCHER}", timeout_s=60, grace_s=2
    )
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False, trial_steps=3)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
    trial = user_dir / "trials/01-halve_micro_batch-trial"
    result = json.loads((trial / "result.json").read_text(encoding="utf-8"))
    assert result["outcome"] == "ok" and result["steps_done"] == 3
    assert (trial / "train.log").read_text(encoding="utf-8")
    assert (
        json.loads((trial / "change.json").read_text(encoding="utf-8"))["rule"]
        == "first_batch.halve_micro_batch"
    )
    assert "Finished: trial passed" in text
    assert app.session.history[0].outcome == "passed"


async def test_quit_during_a_trial_stops_only_that_trial(user_dir: Path, gpu_source: Any) -> None:
    launcher = ScriptedTrial(outcome="ok", wait_for_stop=True)
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        assert launcher.started.wait(10)
        stop = app.trial_stop
        assert stop is not None and not stop.is_set()
        await pilot.press("q")
        await pilot.pause()
    assert stop.is_set()
    assert app.return_value == 0


async def test_real_trial_live_steps_move_against_the_card_and_stop_ends_it(
    user_dir: Path, monkeypatch: Any
) -> None:
    """The real runner and the stand-in launcher: the step counter moves, memory is drawn against the card's
    total, the log tail grows, and Stop ends the trial (recorded as stopped in result.json)."""
    import asyncio

    from functional.tui_helpers import V100
    from oomdoctor.facts.gpu import FakeGpuSource
    from oomdoctor.trial.runner import run_trial

    monkeypatch.setenv("FAKE_STEP_S", "0.15")
    frames = [[(0, 1000.0 + 500.0 * i, 32768.0, 50.0, 150.0)] for i in range(60)]
    source = FakeGpuSource([V100], frames=frames)
    launcher = functools.partial(
        run_trial, launcher=f"{sys.executable} {FAKE_LAUNCHER}", timeout_s=60, grace_s=2
    )
    app = build_app(lang="en", gpu_source=source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False, trial_steps=200)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, source)
        screen = app.screen
        assert isinstance(screen, TrialScreen)
        steps_seen: set[str] = set()
        for _ in range(100):
            await asyncio.sleep(0.05)
            await pilot.pause()
            line = next((ln.strip() for ln in screen_text(app).splitlines() if "Step " in ln), "")
            if line.startswith("Step ") and " of 100" in line:  # the schedule: eval every 100 steps
                steps_seen.add(line.split("·")[0].strip())
            if len(steps_seen) >= 3:
                break
        assert len(steps_seen) >= 3, steps_seen  # the counter moves while the trial runs
        chart = screen.query_one("#trial-memory")
        assert chart.limit_gib == 32.0 and chart.series["0"][0]  # the card's total is the scale
        assert "of 32.00 GiB" in screen_text(app)
        assert screen.feed.all_lines  # the tail shows the launcher's output
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
        # the folded log shows its end, where a failure shows
        from oomdoctor.tui.trial_screen import fold_progress_bars

        last = fold_progress_bars(list(screen.feed.all_lines))[-1].strip()
        assert last and last[:40] in text
    trial = user_dir / "trials/01-halve_micro_batch-trial"
    result = json.loads((trial / "result.json").read_text(encoding="utf-8"))
    assert result["outcome"] == "stopped" and result["steps_done"] < 200
    assert "Finished: trial stopped" in text and app.session.history[0].outcome == "stopped"


async def test_charts_stay_after_the_trial_with_its_phases_marked_and_the_log_folded(
    user_dir: Path, gpu_source: Any
) -> None:
    """The real runner and the stand-in launcher (it evaluates and saves): the chart marks the first update,
    validation and save, stays on screen when the trial ends, and the log shows a few lines until o."""
    from oomdoctor.trial.runner import run_trial

    launcher = functools.partial(
        run_trial, launcher=f"{sys.executable} {FAKE_LAUNCHER}", timeout_s=60, grace_s=2
    )
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False, trial_steps=3)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TrialScreen) and screen.feed.done
        assert screen.query_one("#trial-live").display  # the charts stay
        chart = screen.query_one("#trial-memory")
        assert {"update", "eval", "save"} <= set(chart.marks)
        assert chart.marks["update"] <= chart.marks["eval"] <= chart.marks["save"]
        text = screen_text(app)
        assert "1st update" in text and "validation" in text and "save" in text  # the marks' legend
        assert "Finished: trial passed" in text
        log = screen.query_one("#trial-log")
        folded = log.size.height
        assert folded <= 4 and "o unfolds" in (log.border_title or "")
        await pilot.press("o")
        await pilot.pause()
        assert log.size.height > folded and "o folds" in (log.border_title or "")


def test_a_redrawn_progress_bar_is_shown_once() -> None:
    from oomdoctor.tui.trial_screen import fold_progress_bars

    lines = [
        "***** Running training *****",
        " 33%|###       | 1/3 [00:01<00:02,  1.00it/s]",
        " 67%|######    | 2/3 [00:02<00:01,  1.00it/s]",
        "{'loss': 2.1}",
        "100%|##########| 3/3 [00:03<00:00,  1.00it/s]",
    ]
    assert fold_progress_bars(lines) == [lines[0], lines[2], lines[3], lines[4]]
