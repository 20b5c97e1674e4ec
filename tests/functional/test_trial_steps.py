"""Trials from the app ask the number of steps (the run's schedule gives the default) and offer the probe
(longest samples first), on by default with the real runner, with a switch back to the first steps as they
come; a probe that cannot run here falls back to that, saying why."""

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
from oomdoctor.errors import BadInput
from oomdoctor.tui.app import schedule_steps
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import TrialStepsScreen
from oomdoctor.tui.trial_screen import TrialScreen


class RecordingTrial(ScriptedTrial):
    """The scripted trial, recording whether it was asked to probe; ``probe_fails`` refuses a probe the
    way run_trial does when the data is not local (BadInput, nothing written)."""

    def __init__(self, *, probe_fails: bool = False) -> None:
        super().__init__(outcome="ok")
        self.probe_fails = probe_fails
        self.probes: list[bool] = []

    def __call__(self, config_path: Path, **kwargs: Any) -> Any:
        self.probes.append(bool(kwargs.get("probe")))
        if kwargs.get("probe") and self.probe_fails:
            raise BadInput("the dataset is not on this machine")
        kwargs.pop("probe", None)
        return super().__call__(config_path, **kwargs)


async def _to_dialog(app: Any, pilot: Any, user_dir: Path, gpu_source: Any) -> None:
    config = user_dir / "configs/qwen3_lora.yaml"
    await show_diagnosis(
        app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
    )
    for key in ("a", "enter", "t"):
        await pilot.press(key)
        await settle(app, pilot)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_steps_asked_are_the_steps_run(
    user_dir: Path, gpu_source: Any, lang: str, size: Any
) -> None:
    launcher = RecordingTrial()
    app = build_app(lang=lang, gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    async with app.run_test(size=size) as pilot:
        await _to_dialog(app, pilot, user_dir, gpu_source)
        assert isinstance(app.screen, TrialStepsScreen)
        field = app.screen.query_one("#steps-input")
        assert field.value == "50"  # eval every 100, save every 500: the trial's own 50 come first
        text = screen_text(app)
        assert ("Probe" if lang == "en" else "探测") in text
        field.value = "7"
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, TrialScreen)
    assert launcher.calls[0]["steps"] == 7 and launcher.probes == [False]  # test launchers: probe off


async def test_probe_on_by_default_and_falls_back_when_it_cannot_run(user_dir: Path, gpu_source: Any) -> None:
    launcher = RecordingTrial(probe_fails=True)
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    app.probe_supported = True  # as with the real runner
    async with app.run_test(size=(120, 40)) as pilot:
        await _to_dialog(app, pilot, user_dir, gpu_source)
        assert app.screen.query_one("#steps-probe").value is True
        assert app.screen.query_one("#steps-input").value == "1"  # a probe's first step is the worst batch
        await pilot.press("enter")
        await settle(app, pilot)
        await pilot.press("o")  # unfold the log: the fallback is said there
        await pilot.pause()
        text = screen_text(app)
    assert launcher.probes == [True, False] and launcher.calls[0]["steps"] == 50
    assert "no probe here (the dataset is not on this machine)" in text


async def test_the_switch_back_to_the_first_steps(user_dir: Path, gpu_source: Any) -> None:
    launcher = RecordingTrial()
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=launcher, clock=fixed_clock, cwd=user_dir,
                    scan_at_start=False)  # fmt: skip
    app.probe_supported = True
    async with app.run_test(size=(80, 24)) as pilot:
        await _to_dialog(app, pilot, user_dir, gpu_source)
        await pilot.click("#steps-probe")
        await pilot.pause()
        assert app.screen.query_one("#steps-input").value == "50"
        await pilot.click("#steps-start")
        await settle(app, pilot)
    assert launcher.probes == [False] and launcher.calls[0]["steps"] == 50


def test_schedule_steps_reach_the_first_validation_or_save(user_dir: Path, gpu_source: Any) -> None:
    from oomdoctor import records

    facts = make_facts(user_dir / "configs/qwen3_lora.yaml", gpu_source)
    assert schedule_steps(facts, 50) == 50
    early = records.replace(facts, config=records.replace(facts.config, eval_steps=20))
    assert schedule_steps(early, 50) == 20
    assert schedule_steps(None, 50) == 50
