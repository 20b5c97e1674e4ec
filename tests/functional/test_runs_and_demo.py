"""Start-up: the newest run in the folder opens by itself, ``r`` lists the others, an empty folder offers
the demo; ``oomdoctor demo`` and ``oomdoctor tui`` build the app from the command line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from functional.tui_helpers import CONFIG_TEXT, OOM_LOG_TEXT, ScriptedTrial, fixed_clock, screen_text
from oomdoctor.cli import main
from oomdoctor.demo import demo_paths
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import MainScreen, PickerScreen


def _runs_folder(user_dir: Path) -> Path:
    """Two runs: the config + log from the fixture (older), a WebUI run under saves/ (newer)."""
    for path in (user_dir / "configs/qwen3_lora.yaml", user_dir / "qwen3_lora.log"):
        os.utime(path, (1_000, 1_000))
    saves = user_dir / "saves/Qwen3-0.6B/lora/train_2026"
    saves.mkdir(parents=True)
    (saves / "training_args.yaml").write_text(CONFIG_TEXT, encoding="utf-8")
    (saves / "running_log.txt").write_text(OOM_LOG_TEXT, encoding="utf-8")
    return saves


async def test_newest_run_opens_and_runs_lists_the_others(user_dir: Path, gpu_source: Any) -> None:
    saves = _runs_folder(user_dir)
    app = build_app(
        lang="en", gpu_source=gpu_source, trial_launcher=ScriptedTrial(), clock=fixed_clock, cwd=user_dir
    )
    messages: list[Any] = []
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert app.session.config == saves / "training_args.yaml"
        assert app.session.log == saves / "running_log.txt"
        assert app.session.diagnosis is not None and app.session.diagnosis.oom
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        text = screen_text(app)
        assert "saves/Qwen3-0.6B/lora/train_2026/{training_args.yaml, running_log.txt}" in text
        assert "configs/qwen3_lora.yaml + qwen3_lora.log" in text and "(demo)" in text
        await pilot.press("down", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert app.session.config == user_dir / "configs/qwen3_lora.yaml"
        assert app.session.log == user_dir / "qwen3_lora.log"
    kinds = [type(m).__name__ for m in {id(m): m for m in messages}.values()]
    assert (
        kinds.count("RunsFound") == 2 and kinds.count("RunLoaded") == 2 and kinds.count("DiagnosisReady") == 2
    )


async def test_empty_folder_says_so_and_offers_the_demo(tmp_path: Path, gpu_source: Any) -> None:
    app = build_app(
        lang="en", gpu_source=gpu_source, trial_launcher=ScriptedTrial(), clock=fixed_clock, cwd=tmp_path
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        assert "No LLaMA-Factory run found here" in screen_text(app)
        assert "esc Back" not in screen_text(app)  # nothing open to go back to
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert app.session.is_demo
        assert (app.session.config, app.session.log) == demo_paths()
        assert "demo case" in screen_text(app)


def test_tui_verb_refuses_a_missing_config_before_opening(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["tui", "--config", str(tmp_path / "nope.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "nope.yaml" in err


def test_verbs_build_the_app_without_running_it(monkeypatch: pytest.MonkeyPatch, user_dir: Path) -> None:
    """``oomdoctor`` (no verb), ``tui`` and ``demo`` hand their arguments to the factory."""
    built: list[OomDoctorApp] = []

    def fake_run(self: OomDoctorApp, *args: Any, **kwargs: Any) -> int:
        built.append(self)
        return 0

    monkeypatch.setattr(OomDoctorApp, "run", fake_run)
    assert main(["--lang", "zh"]) == 0
    assert (
        main(["tui", "--config", "configs/qwen3_lora.yaml", "--log", "qwen3_lora.log", "--trial-steps", "7"])
        == 0
    )
    assert main(["demo", "--lang", "en"]) == 0
    no_verb, tui, demo = built
    assert no_verb.session.lang == "zh" and no_verb.session.config is None and no_verb.scan_at_start
    assert tui.session.config == Path("configs/qwen3_lora.yaml") and tui.trial_steps == 7
    assert demo.session.is_demo and (demo.session.config, demo.session.log) == demo_paths()
