"""A trial that cannot work is not started: a change that needs a package not installed here (Liger) and a
machine without LLaMA-Factory's command each say what to install. A trial that fails for a reason other
than memory says what failed, in one line from its log."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from functional.tui_helpers import (
    ScriptedTrial,
    fixed_clock,
    halve_batch_proposal,
    make_diagnosis,
    make_facts,
    screen_text,
    settle,
    show_diagnosis,
)
from oomdoctor.diagnosis import Proposal
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import ErrorScreen
from oomdoctor.tui.trial_screen import TrialScreen

FAKE_LAUNCHER = Path(__file__).resolve().parent.parent / "fixtures" / "fake_launcher.py"


def _liger_proposal() -> Proposal:
    base = halve_batch_proposal()
    return Proposal(
        rule="logits.liger_fused_loss",  # the real rule: its requires names liger-kernel
        title={"en": "Fuse the loss with Liger kernel", "zh": "用 Liger kernel 融合损失"},
        changes={"enable_liger_kernel": [None, True]},
        why=base.why,
        cost=base.cost,
        judge=base.judge,
        cause="logits",
    )


async def _apply_and_try(app: Any, pilot: Any, user_dir: Path, gpu_source: Any, proposal: Proposal) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    diagnosis = make_diagnosis()
    diagnosis.proposal, diagnosis.alternatives = proposal, []
    await show_diagnosis(
        app, pilot, make_facts(config, gpu_source), diagnosis, config, user_dir / "qwen3_lora.log"
    )
    for key in ("a", "enter", "t"):
        await pilot.press(key)
        await settle(app, pilot)


@pytest.mark.skipif(
    importlib.util.find_spec("liger_kernel") is not None, reason="liger-kernel is installed here"
)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_change_needing_a_missing_package_is_not_tried(
    user_dir: Path, gpu_source: Any, lang: str, size: tuple[int, int]
) -> None:
    launcher = ScriptedTrial(outcome="ok")
    app = build_app(lang=lang, gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    async with app.run_test(size=size) as pilot:
        await _apply_and_try(app, pilot, user_dir, gpu_source, _liger_proposal())
        assert isinstance(app.screen, ErrorScreen)
        text = screen_text(app).replace("\n", " ")
        assert "pip install liger-kernel" in app.screen.message and "liger-kernel" in text
        await pilot.press("b")
        await pilot.pause()
        assert not isinstance(app.screen, (ErrorScreen, TrialScreen))
    assert launcher.calls == []  # nothing was started


async def test_no_llamafactory_names_what_to_install(user_dir: Path, gpu_source: Any) -> None:
    launcher = ScriptedTrial(outcome="ok")
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    app.launcher_program = "llamafactory-cli-not-installed-here"  # as if LLaMA-Factory were absent
    async with app.run_test(size=(80, 24)) as pilot:
        await _apply_and_try(app, pilot, user_dir, gpu_source, halve_batch_proposal())
        assert isinstance(app.screen, ErrorScreen)
        message = app.screen.message
    assert "pip install llamafactory==0.9.5" in message and "--launcher" not in message
    assert launcher.calls == []


async def test_a_trial_failing_for_another_reason_says_what_failed(user_dir: Path, gpu_source: Any) -> None:
    from oomdoctor.trial.runner import run_trial

    launcher = functools.partial(run_trial, launcher=f"FAKE_MODE=fail {sys.executable} {FAKE_LAUNCHER}",
                                 timeout_s=60, grace_s=2)  # fmt: skip
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False, trial_steps=3)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await _apply_and_try(app, pilot, user_dir, gpu_source, halve_batch_proposal())
        await pilot.press("enter")  # the steps dialog: the default
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, TrialScreen)
        text = screen_text(app)
    assert "It failed, but not for memory: RuntimeError: boom" in text
