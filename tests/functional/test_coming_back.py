"""Coming back: ``oomdoctor`` reopened in the same folder after a trial shows the run that failed (not a
trial's config with another's log), the chain of changes and their trials, and the lengths measured then;
the trials folder is the session's memory."""

from __future__ import annotations

import json
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
from oomdoctor import records
from oomdoctor.discover import read_saved_session, saved_changes
from oomdoctor.facts.types import DataFacts
from oomdoctor.tui.comparison import ComparisonScreen
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import MainScreen


def _app(user_dir: Path, gpu_source: Any, lang: str = "en", **kwargs: Any) -> Any:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=ScriptedTrial(outcome="oom"),
                     clock=fixed_clock, cwd=user_dir, **kwargs)  # fmt: skip


async def _first_session(user_dir: Path, gpu_source: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Measure the lengths, apply the proposal, try it (it still fails), diagnose the trial, apply again."""

    def token_lengths(config: Any, *, cutoff_len: int | None = None, progress: Any = None) -> DataFacts:
        return DataFacts(source="tokenized", samples=1600, max_tokens=1234, cutoff_len=2048, truncated=0)

    monkeypatch.setattr("oomdoctor.facts.dataset.token_lengths", token_lengths)
    # the hand-built model facts have no full shape to re-estimate with: keep the estimate as it was
    monkeypatch.setattr("oomdoctor.tui.app.facts_with_lengths",
                        lambda facts, data: records.replace(facts, data=data))  # fmt: skip
    app = _app(user_dir, gpu_source, scan_at_start=False)
    config, log = user_dir / "configs/qwen3_lora.yaml", user_dir / "qwen3_lora.log"
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, log)
        await pilot.press("m")
        await settle(app, pilot)
    app = _app(user_dir, gpu_source, scan_at_start=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, log)
        for key in ("a", "enter", "t", "enter", "d", "a", "enter"):
            await pilot.press(key)
            await settle(app, pilot)


async def test_reopening_shows_the_failed_run_its_changes_trials_and_lengths(
    user_dir: Path, gpu_source: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _first_session(user_dir, gpu_source, monkeypatch)
    saved = read_saved_session(user_dir)
    assert saved is not None
    assert saved.config == (user_dir / "configs/qwen3_lora.yaml").resolve()
    assert saved.log == (user_dir / "qwen3_lora.log").resolve()
    assert json.loads((user_dir / "trials/lengths.json").read_text(encoding="utf-8"))["max_tokens"] == 1234
    changes = saved_changes(user_dir)
    assert [c.folder.name for c in changes][0] == "01-halve_micro_batch" and len(changes) == 2
    assert changes[1].parent == str(user_dir / "trials/01-halve_micro_batch-trial")  # the chain

    app = _app(user_dir, gpu_source)  # `oomdoctor` again, in the same folder, nothing named
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await settle(app, pilot)
        session = app.session
        assert isinstance(app.screen, MainScreen)
        assert session.config == saved.config and session.log == saved.log  # not a trial's files
        assert session.facts is not None and session.facts.data is not None
        assert session.facts.data.max_tokens == 1234  # the lengths measured before, not tokenized again
        assert [e.folder.name for e in session.history] == [c.folder.name for c in changes]
        first = session.history[0]
        assert first.outcome == "oom" and first.peak_mib == 18400.0
        assert first.trial_dirs == [user_dir / "trials/01-halve_micro_batch-trial"]
        assert "Out of memory" in screen_text(app)  # the failed run, not "no OOM"
        await pilot.press("h")
        await pilot.pause()
        text = screen_text(app)
        assert "Run that failed: configs/qwen3_lora.yaml + qwen3_lora.log" in text
        assert "Reopened" in text
        assert "Changes and their trials, in trials/" in text
        assert "01-halve_micro_batch-trial" in text  # the second change was made from that trial
        assert "trial ran out" in text and "17.97 GiB" in text
        await pilot.press("v")
        await pilot.pause()
        assert isinstance(app.screen, ComparisonScreen)
        text = screen_text(app)
        assert "original run (qwen3_lora.log)" in text and "01-halve_micro_batch-trial" in text
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_history_is_never_cut(
    user_dir: Path, gpu_source: Any, lang: str, size: tuple[int, int]
) -> None:
    app = _app(user_dir, gpu_source, lang, scan_at_start=False)
    config, log = user_dir / "configs/qwen3_lora.yaml", user_dir / "qwen3_lora.log"
    async with app.run_test(size=size) as pilot:
        await show_diagnosis(app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, log)
        for key in ("a", "enter", "t", "enter", "b", "h"):
            await pilot.press(key)
            await settle(app, pilot)
        text = screen_text(app).replace("\n", " ")
    # the change column wraps inside its column: both fields and their values are there whole
    for part in ("per_device_train_batch_size", "4→2,", "gradient_accumulation_steps", "8→16"):
        assert part in text, part


def test_no_saved_session_without_the_trials_folder(tmp_path: Path) -> None:
    assert read_saved_session(tmp_path) is None
    assert saved_changes(tmp_path) == []
