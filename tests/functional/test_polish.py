"""Loose ends of the app: an in-effect item said once, alternatives chosen with the mouse, the trial chart's
marks from the probe's milestones, utilisation and power as charts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from functional.tui_helpers import (
    ScriptedTrial,
    apply_and_start_trial,
    fixed_clock,
    make_diagnosis,
    make_facts,
    screen_text,
    show_diagnosis,
)
from oomdoctor.diagnosis import Finding
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.messages import ProposalStepped
from oomdoctor.tui.screens import ExplainScreen
from oomdoctor.tui.trial_screen import TrialScreen

GUARD = {
    "en": "Gradient checkpointing is already on (LLaMA-Factory's default): not counted as a new option.",
    "zh": "梯度检查点已开启(LLaMA-Factory 默认开启):不能当作新优化。",
}


def _app(user_dir: Path, gpu_source: Any, lang: str) -> Any:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                     cwd=user_dir, scan_at_start=False)  # fmt: skip


def _guarded_diagnosis() -> Any:
    """A diagnosis where a guard held: its reason is a finding and each proposal's "already on", as the walk
    makes them (rules/walk.py)."""
    diagnosis = make_diagnosis()
    diagnosis.findings.append(Finding(id="guard.activations.enable_gradient_checkpointing", text=dict(GUARD)))
    for proposal in (diagnosis.proposal, *diagnosis.alternatives):
        proposal.already_on = [dict(GUARD)]
    return diagnosis


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_in_effect_item_is_said_once_per_screen(user_dir: Path, gpu_source: Any, lang: str) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source, lang)
    guard = {"en": "not counted as a new option", "zh": "不能当作新优化"}[lang]  # the guard's own words
    async with app.run_test(size=(120, 40)) as pilot:
        await show_diagnosis(
            app,
            pilot,
            make_facts(config, gpu_source),
            _guarded_diagnosis(),
            config,
            user_dir / "qwen3_lora.log",
        )
        await pilot.press("p")
        await pilot.pause()
        assert screen_text(app).count(guard) == 1  # the proposal's "already on"
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        explain = screen_text(app)
        assert explain.count(guard) == 1
        await pilot.press("b")
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        facts = screen_text(app)
    assert facts.count(guard) == 0  # on the proposal, where it says what it means for the change
    assert make_diagnosis().findings[0].text[lang][:12] in facts  # the in-effect finding stays


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_alternative_is_chosen_with_the_mouse(user_dir: Path, gpu_source: Any, lang: str) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    app = _app(user_dir, gpu_source, lang)
    stepped: list[int] = []
    async with app.run_test(size=(120, 40), message_hook=lambda m: stepped.append(m.step) if isinstance(m, ProposalStepped) else None) as pilot:  # fmt: skip
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        await pilot.press("p")
        await pilot.pause()
        second = make_diagnosis().alternatives[0]
        assert await pilot.click(".alternative-2")
        await pilot.pause()
        assert app.session.current_proposal is not None
        assert app.session.current_proposal.rule == second.rule
        assert f"▸ 2. {second.title[lang][:10]}" in screen_text(app)
        assert await pilot.click(".alternative-1")
        await pilot.pause()
        assert app.session.proposal_index == 0
        await pilot.press("n")  # the keys go on working
        await pilot.pause()
        assert app.session.proposal_index == 1
    assert sorted(set(stepped)) == [-1, 1]  # the same request as n / N


MILESTONES = [
    {"name": "load", "passed": True, "step": None, "time_s": 0.1, "peak_mib": 1200.0},
    {"name": "longest_batch", "passed": True, "step": 1, "time_s": 0.2, "peak_mib": 9800.0},
    {"name": "optimizer_step", "passed": True, "step": 1, "time_s": 0.4, "peak_mib": 17600.0},
    {"name": "eval", "passed": True, "step": 2, "time_s": 0.6, "peak_mib": 18400.0},
    {"name": "save", "passed": False, "reached": True, "peak_mib": 18400.0},
]


class ProbeTrial(ScriptedTrial):
    """The scripted trial, its result.json with a probe's milestones as ``trial --probe`` writes them."""

    def __call__(self, config_path: Path, **kwargs: Any) -> Any:
        result = super().__call__(config_path, **kwargs)
        record = dict(result.record, milestones=MILESTONES, probe_passed=False)
        (result.folder / "result.json").write_text(json.dumps(record), encoding="utf-8")
        return type(result)(folder=result.folder, record=record)


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_the_chart_marks_come_from_the_probe_milestones(
    user_dir: Path, gpu_source: Any, lang: str
) -> None:
    app = build_app(lang=lang, gpu_source=gpu_source, trial_launcher=ProbeTrial(outcome="ok"), clock=fixed_clock,
                    cwd=user_dir, scan_at_start=False, trial_steps=3)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await apply_and_start_trial(app, pilot, user_dir, gpu_source)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TrialScreen) and screen.feed.done
        chart = screen.query_one("#trial-memory")
        # the probe's own moments, not when the log's progress line arrived; a save not passed is not marked
        assert chart.marks == {"longest_batch": 0.2, "update": 0.4, "eval": 0.6}
        legend = str(screen.query_one("#trial-memory-label", Static).content)
    words = {"en": ("longest batch 0.2 s (step 1, peak 9.57 GiB)", "validation 0.6 s (step 2, peak 17.97 GiB)"),
             "zh": ("最长批次 0.2 秒 (第 1 步,峰值 9.57 GiB)", "验证 0.6 秒 (第 2 步,峰值 17.97 GiB)")}  # fmt: skip
    for phrase in words[lang]:
        assert f"┃ {phrase}\n" in legend + "\n"
