"""The end of a trial: the comparison with the trial it came from, readable (nothing cut) at 80x24 and
120x40 in both languages; a parent that is not a trial folder is not compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from functional.tui_helpers import (
    ScriptedTrial,
    fixed_clock,
    make_diagnosis,
    make_facts,
    screen_text,
    settle,
    show_diagnosis,
)
from oomdoctor.i18n import msg
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.comparison import ComparisonView, baseline_row
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import ErrorScreen
from oomdoctor.tui.strings import t
from oomdoctor.tui.trial_screen import TrialScreen

FIRST = "01-halve_micro_batch-trial"


def comparison_text(app: OomDoctorApp) -> str:
    """The whole comparison as laid out at the width it has on screen (it scrolls at 80x24)."""
    import io

    from rich.console import Console

    static = app.screen.query_one("#trial-compare-table")
    console = Console(width=static.size.width, file=io.StringIO(), color_system=None)
    console.print(static.content)
    return console.file.getvalue()  # type: ignore[attr-defined]


def _app(user_dir: Path, gpu_source: Any, lang: str, launcher: Any) -> OomDoctorApp:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                     scan_at_start=False)  # fmt: skip


async def _open(app: OomDoctorApp, pilot: Any, user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source)
    await show_diagnosis(app, pilot, facts, make_diagnosis(), config, user_dir / "qwen3_lora.log")


async def _apply_and_try(app: OomDoctorApp, pilot: Any) -> None:
    for key in ("a", "enter", "t", "enter"):
        await pilot.press(key)
        await settle(app, pilot)


async def _two_trials(app: OomDoctorApp, pilot: Any, user_dir: Path, gpu_source: Any) -> str:
    """Change, try (it still fails), diagnose the trial, change again, try: the second is compared."""
    await _open(app, pilot, user_dir, gpu_source)
    await _apply_and_try(app, pilot)
    await pilot.press("d")
    await settle(app, pilot)
    await _apply_and_try(app, pilot)
    assert isinstance(app.screen, TrialScreen)
    feed = app.screen.feed
    assert feed.comparison is not None and [r.name for r in feed.comparison.rows][0] == FIRST
    return feed.comparison.rows[1].name


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_comparison_is_readable_in_both_languages(
    user_dir: Path, gpu_source: Any, lang: str, size: tuple[int, int]
) -> None:
    app = _app(user_dir, gpu_source, lang, ScriptedTrial(outcome="oom"))
    async with app.run_test(size=size) as pilot:
        second = await _two_trials(app, pilot, user_dir, gpu_source)
        text = comparison_text(app)
    assert msg("cmp_trials_title", lang) in text
    # Nothing cut: the failed run as baseline, each trial's full name and its one change, the reference
    # mark and the difference sit on the screen.
    assert t("cmp_baseline_name", lang, log="qwen3_lora.log") in text
    assert FIRST in text and second in text
    assert "per_device_train_batch_size 4→2" in text and "bf16 true→false" in text
    assert msg("cmp_first", lang) in text
    outcome_oom = msg("cmp_outcome_oom", lang, phase=msg("phase_first_batch", lang))
    assert "+0.00 GiB" in text and "MiB" not in text  # one unit
    if size[0] >= 120:  # the course's columns side by side; a long cell wraps inside its column
        for key in ("cmp_h_trial", "cmp_h_peak_gib", "cmp_h_outcome", "cmp_h_delta"):
            assert msg(key, lang) in text
        assert "17.97" in text and "30.53" in text  # the trials' peaks under the failed run's
        assert t("cmp_baseline_delta", lang) in text
    else:  # one block per trial, each value with its label
        assert outcome_oom in text
        assert f"{msg('cmp_h_peak_gib', lang)}{':' if lang == 'zh' else ': '}17.97" in text


async def test_every_trial_of_the_run_is_compared_not_only_the_latest(
    user_dir: Path, gpu_source: Any
) -> None:
    """Two trials from two proposals of the same run (the second not made from the first): both rows,
    under the failed run's, not only the latest as "(reference)"."""
    app = _app(user_dir, gpu_source, "en", ScriptedTrial(outcome="ok"))
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(app, pilot, user_dir, gpu_source)
        await _apply_and_try(app, pilot)
        await pilot.press("b")  # back to the proposals of the same run
        await settle(app, pilot)
        await pilot.press("n")  # the alternative
        await settle(app, pilot)
        await _apply_and_try(app, pilot)
        assert isinstance(app.screen, TrialScreen)
        names = [r.name for r in app.screen.feed.comparison.rows]
        text = screen_text(app)
    assert names == [FIRST, "02-set_eval_batch-trial"]
    assert "original run (qwen3_lora.log)" in text and FIRST in text and "02-set_eval_batch-trial" in text
    assert "per_device_eval_batch_size null→4" in text  # each trial with its one change


def test_a_failed_trials_lower_peak_is_not_a_saving(tmp_path: Path) -> None:
    import io
    import json

    from rich.console import Console

    from oomdoctor.trial.compare import compare_trials

    for name, peak, outcome in (("01-a-trial", 18400.0, "ok"), ("02-b-trial", 9000.0, "oom")):
        folder = tmp_path / name
        folder.mkdir()
        record = {"outcome": outcome, "exit_code": 0 if outcome == "ok" else 1, "wall_s": 40.0, "phase": "load",
                  "peak_memory_mib": peak, "steps_requested": 5, "steps_done": 5, "peak_source": "nvml"}  # fmt: skip
        (folder / "result.json").write_text(json.dumps(record), encoding="utf-8")
    view = ComparisonView(compare_trials([tmp_path / "01-a-trial", tmp_path / "02-b-trial"]), "en")
    console = Console(width=76, file=io.StringIO(), color_system=None)
    console.print(view)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "-9.18 GiB" in text and "(it failed: not a saving)" in text


def test_the_failed_run_row_reads_its_log() -> None:
    from oomdoctor.facts.types import LogFacts

    log = LogFacts(path="train.log", oom=True, phase="long_sample", good_steps=29, total_steps=50,
                   capacity_mib=32500.0, free_mib=1350.0)  # fmt: skip
    row = baseline_row(log, Path("train.log"), "en")
    assert row is not None and row.outcome == "oom" and row.peak_mib == 31150.0
    assert (row.steps_done, row.total_steps, row.phase) == (29, 50, "long_sample")
    assert baseline_row(None, None, "en") is None


async def test_a_plain_config_parent_is_not_compared(user_dir: Path, gpu_source: Any) -> None:
    """Only trial folders (with result.json) go to compare_trials: a config's folder is not a trial."""
    app = _app(user_dir, gpu_source, "en", ScriptedTrial(outcome="ok"))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, user_dir, gpu_source)
        app.session.parent_trial = user_dir / "configs"  # e.g. a trial folder whose result.json was removed
        await _apply_and_try(app, pilot)
        assert isinstance(app.screen, TrialScreen), app.screen
        feed = app.screen.feed
        assert app.session.history[0].parent == str(user_dir / "configs")
        assert [r.name for r in feed.comparison.rows] == [FIRST]
        assert "Finished: trial passed" in screen_text(app)


async def test_a_trial_that_left_no_result_shows_its_outcome_without_a_table(
    user_dir: Path, gpu_source: Any
) -> None:
    from oomdoctor.trial.runner import TrialResult

    def no_result(config_path: Path, *, out_dir: Path, **_: Any) -> Any:
        Path(out_dir).mkdir(parents=True)
        return TrialResult(
            folder=Path(out_dir),
            record={"outcome": "failed", "ok": False, "wall_s": 1.0, "peak_memory_mib": None},
        )

    app = _app(user_dir, gpu_source, "en", no_result)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, user_dir, gpu_source)
        await _apply_and_try(app, pilot)
        assert isinstance(app.screen, TrialScreen) and not isinstance(app.screen, ErrorScreen)
        assert app.screen.feed.comparison is None
        text = screen_text(app)
    assert "Finished: trial failed" in text and "Trials compared" not in text


def test_narrow_comparison_becomes_one_block_per_trial(tmp_path: Path) -> None:
    import io
    import json

    from rich.console import Console

    from oomdoctor.trial.compare import compare_trials

    for name, peak in (("01-a-trial", 18400.0), ("02-b-trial", 12000.0)):
        folder = tmp_path / name
        folder.mkdir()
        record = {"outcome": "ok", "ok": True, "exit_code": 0, "wall_s": 40.0, "peak_memory_mib": peak,
                  "steps_requested": 5, "steps_done": 5, "peak_source": "nvml"}  # fmt: skip
        (folder / "result.json").write_text(json.dumps(record), encoding="utf-8")
    view = ComparisonView(compare_trials([tmp_path / "01-a-trial", tmp_path / "02-b-trial"]), "en")

    def rendered(width: int) -> str:
        console = Console(width=width, file=io.StringIO(), color_system=None)
        console.print(view)
        return console.file.getvalue()  # type: ignore[attr-defined]

    narrow, wide = rendered(76), rendered(116)
    assert "peak GiB: 17.97" in narrow and "peak GiB: 11.72" in narrow
    assert "-6.25 GiB, +0.0 s" in narrow
    assert "peak GiB" in wide and "peak GiB:" not in wide  # a header row, not label: value pairs
    assert "-6.25 GiB, +0.0 s" in wide
