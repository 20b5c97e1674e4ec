"""The smaller things a new user tripped over: numbering of questions across diagnoses, a previous key,
applying the same change twice, sizes with separators."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from functional.tui_helpers import (
    fixed_clock,
    make_diagnosis,
    make_facts,
    screen_text,
    settle,
    show_diagnosis,
)
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.render import fmt_mib
from oomdoctor.tui.screens import ApplyScreen
from oomdoctor.tui.strings import t


def _app(user_dir: Path, gpu_source: Any, lang: str = "en") -> Any:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                     cwd=user_dir, scan_at_start=False)  # fmt: skip


async def _open(app: Any, pilot: Any, user_dir: Path, gpu_source: Any, **kwargs: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    facts = make_facts(config, gpu_source, phase="unknown" if kwargs.get("questions") else "first_batch")
    await show_diagnosis(app, pilot, facts, make_diagnosis(**kwargs), config, user_dir / "qwen3_lora.log")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_second_question_is_not_question_1_of_1_again(
    user_dir: Path, gpu_source: Any, lang: str, size: Any
) -> None:
    """The engine asks one tier per diagnosis; after one answer the next question is number 2."""
    from oomdoctor.diagnosis import Diagnosis
    from oomdoctor.rules.questions import builtin_question
    from oomdoctor.tui.app import OomDoctorApp

    app = _app(user_dir, gpu_source, lang)
    async with app.run_test(size=size) as pilot:
        await _open(app, pilot, user_dir, gpu_source, questions=True)
        facts = app.session.facts.with_answers({"phase": "first_batch"})  # the first question answered
        second = Diagnosis(oom=True, phase="unknown", cause="unknown",
                           questions=[builtin_question("weights_loaded", "engine")])  # fmt: skip
        app.post_message(OomDoctorApp.DiagnosisReady(facts, second))
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
    assert t("question_header", lang, index=2, count=2) in text


async def test_previous_goes_back_through_the_alternatives(user_dir: Path, gpu_source: Any) -> None:
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(app, pilot, user_dir, gpu_source)
        assert "N Previous" in screen_text(app)
        await pilot.press("N")
        await pilot.pause()
        assert app.session.current_proposal.rule == "eval.set_eval_batch"  # wrapped round to the last
        await pilot.press("N")
        await pilot.pause()
        assert app.session.current_proposal.rule == "first_batch.halve_micro_batch"


async def test_applying_the_same_change_twice_says_so(user_dir: Path, gpu_source: Any) -> None:
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, user_dir, gpu_source)
        for key in ("a", "enter"):
            await pilot.press(key)
            await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        assert isinstance(app.screen, ApplyScreen)
        assert app.screen.already == user_dir / "trials/01-halve_micro_batch"
        notice = str(app.screen.query_one("#apply-already").content)
    assert "already written from this run, in trials/01-halve_micro_batch" in notice


def test_sizes_have_thousands_separators() -> None:
    assert fmt_mib(1000) == "1,000 MiB" and fmt_mib(3963 / 4) == "991 MiB"


@pytest.mark.parametrize("key", ["down", "pagedown"])
async def test_the_proposal_scrolls_with_arrows_and_pagedown_at_once(
    user_dir: Path, gpu_source: Any, key: str
) -> None:
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, user_dir, gpu_source)
        view = app.screen.query_one("#proposal-view")
        assert view.max_scroll_y > 0 and view.scroll_y == 0
        await pilot.press(key)  # no Tab first
        await pilot.pause()
        assert view.scroll_y > 0
