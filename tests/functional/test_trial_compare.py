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
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import ErrorScreen
from oomdoctor.tui.trial_screen import ComparisonView, TrialScreen

FIRST = "01-halve_micro_batch-trial"


def _app(user_dir: Path, gpu_source: Any, lang: str, launcher: Any) -> OomDoctorApp:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                     scan_at_start=False)  # fmt: skip


async def _open(app: OomDoctorApp, pilot: Any, user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source)
    await show_diagnosis(app, pilot, facts, make_diagnosis(), config, user_dir / "qwen3_lora.log")


async def _apply_and_try(app: OomDoctorApp, pilot: Any) -> None:
    for key in ("a", "enter", "t"):
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
        text = screen_text(app)
    assert msg("cmp_trials_title", lang) in text
    # Nothing cut: each trial's full name, the reference mark and the difference sit on the screen.
    assert FIRST in text and second in text
    assert msg("cmp_first", lang) in text
    difference = msg("cmp_delta", lang, mib="+0", gib="+0.00", wall="+0.00")
    outcome_oom = msg("cmp_outcome_oom", lang, phase=msg("phase_first_batch", lang))
    if size[0] >= 120:  # the course's columns side by side; a long cell wraps inside its column
        for key in ("cmp_h_trial", "cmp_h_peak_mib", "cmp_h_peak_gib", "cmp_h_outcome", "cmp_h_delta"):
            assert msg(key, lang) in text
        assert "+0 MiB" in text and "18,400" in text
    else:  # one block per trial, each value with its label
        assert difference in text and outcome_oom in text
        assert f"{msg('cmp_h_peak_mib', lang)}{':' if lang == 'zh' else ': '}18,400" in text


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
    assert "peak MiB: 18,400" in narrow and "peak MiB: 12,000" in narrow
    assert "-6,400 MiB (-6.25 GiB), +0.00 s" in narrow
    assert "peak MiB" in wide and "peak MiB:" not in wide  # a header row, not label: value pairs
    assert "-6,400 MiB (-6.25 GiB), +0.00 s" in wide.replace("\n", " ") or "-6,400 MiB" in wide
