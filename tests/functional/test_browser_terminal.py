"""What a browser terminal (JupyterLab's xterm.js) needs: no claimed copy, a command.sh that runs from
anywhere, and every Esc action on a key the browser leaves to the terminal (b / Backspace), so no flow
needs Esc twice (JupyterLab takes focus from the terminal on a second Esc)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from functional.tui_helpers import (
    ScriptedTrial,
    apply_first_proposal,
    fixed_clock,
    make_diagnosis,
    make_facts,
    screen_text,
    show_diagnosis,
)
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import CommandScreen, ExplainScreen, MainScreen, PickerScreen
from oomdoctor.tui.trial_screen import TrialScreen
from oomdoctor.tui.widgets import ShellCommand


def _app(user_dir: Path, gpu_source: Any, lang: str = "en", **kwargs: Any) -> Any:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=kwargs.pop("launcher", ScriptedTrial()),
                     clock=fixed_clock, cwd=user_dir, scan_at_start=False, **kwargs)  # fmt: skip


def test_command_sh_runs_the_command_from_any_folder(user_dir: Path, tmp_path: Path) -> None:
    """The script written beside the config runs the same command where it must run (a stand-in
    llamafactory-cli on PATH records its arguments and working folder)."""
    from functional.tui_helpers import halve_batch_proposal
    from oomdoctor.patch import write_patched_config

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "called.txt"
    fake = bin_dir / "llamafactory-cli"
    fake.write_text(f'#!/bin/sh\necho "$PWD $*" > {record}\n', encoding="utf-8")
    fake.chmod(0o755)
    result = write_patched_config(user_dir / "configs/qwen3_lora.yaml", halve_batch_proposal(),
                                  user_dir / "trials/01-halve")  # fmt: skip
    script = result.command_file
    assert script is not None and script == user_dir / "trials/01-halve/command.sh"
    assert os.access(script, os.X_OK)
    assert script not in result.files  # the proposal's own files stay as they were
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(script)], cwd=elsewhere, env=env, check=True, timeout=30)
    cwd, *args = record.read_text(encoding="utf-8").split()
    assert Path(cwd).resolve() == user_dir.resolve()
    assert args == ["train", str(result.config_path)]


def test_shell_command_breaks_between_words_with_continuations() -> None:
    command = (
        "FORCE_TORCHRUN=1 llamafactory-cli train /very/long/path/to/trials/01-halve_micro_batch/config.yaml"
    )
    lines = ShellCommand(command).lines(40)
    assert len(lines) > 1 and all(line.endswith(" \\") for line in lines[:-1])
    joined = " ".join(line.removesuffix(" \\").strip() for line in lines)
    assert joined == command  # the lines copied together are the same command
    assert ShellCommand(command).lines(200) == [command]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_command_dialog_shows_how_to_copy_and_closes_with_b(
    user_dir: Path, gpu_source: Any, lang: str, size: tuple[int, int]
) -> None:
    app = _app(user_dir, gpu_source, lang)
    async with app.run_test(size=size) as pilot:
        await apply_first_proposal(app, pilot, user_dir, gpu_source)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CommandScreen)
        text = screen_text(app)
        assert "Shift" in text and "Ctrl+C" in text
        assert "bash trials/01-halve_micro_batch/command.sh" in text
        assert ("copied" if lang == "en" else "已复制") not in text
        await pilot.press("backspace")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


@pytest.mark.parametrize("key", ["b", "backspace"])
async def test_every_dialog_and_back_works_without_esc(user_dir: Path, gpu_source: Any, key: str) -> None:
    """Explain, the command, the trial screen and the run picker each close / go back on b or Backspace,
    and the footer shows that key."""
    app = _app(user_dir, gpu_source, launcher=ScriptedTrial(outcome="ok"))
    async with app.run_test(size=(80, 24)) as pilot:
        await apply_first_proposal(app, pilot, user_dir, gpu_source)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen) and "b Close" in screen_text(app)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        await pilot.press("t", "enter")  # the steps dialog: Enter takes the default
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, TrialScreen) and "b Back" in screen_text(app)
        await pilot.press("c")  # the trial screen's command: a dialog, closed the same way
        await pilot.pause()
        assert isinstance(app.screen, CommandScreen)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, TrialScreen)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen) and "b Back" in screen_text(app)
        await pilot.press(key)
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


async def test_typing_b_in_the_folder_field_types_it(user_dir: Path, gpu_source: Any) -> None:
    app = _app(user_dir, gpu_source)
    config = user_dir / "configs/qwen3_lora.yaml"
    async with app.run_test(size=(80, 24)) as pilot:
        await show_diagnosis(
            app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
        )
        await pilot.press("a")
        await pilot.pause()
        field = app.screen.query_one("#apply-folder")
        field.value = "trials/x"
        field.cursor_position = len(field.value)
        await pilot.press("b", "backspace", "b")
        await pilot.pause()
        assert field.value == "trials/xb"
