"""Snapshots of every screen in both languages at 80x24 and 120x40, each reached by Pilot key presses.

Stable by construction: a scripted GPU, a fixed clock, a scripted trial, hand-built diagnoses, and paths
shown relative to the folder the app was started in. Update with ``pytest tests/snapshots --snapshot-update``
after checking the new pictures (``snapshot_report.html``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from functional.tui_helpers import (
    ScriptedTrial,
    fixed_clock,
    make_diagnosis,
    make_facts,
    settle,
    show_diagnosis,
)
from oomdoctor.tui.factory import build_app

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]
LANGS = ["en", "zh"]


def _app(user_dir: Path, gpu_source: Any, lang: str, **kwargs: Any) -> Any:
    return build_app(lang=lang, gpu_source=gpu_source, trial_launcher=kwargs.pop("trial_launcher", ScriptedTrial()),
                     clock=fixed_clock, cwd=user_dir, scan_at_start=False, **kwargs)  # fmt: skip


def _drive(
    user_dir: Path,
    gpu_source: Any,
    keys: Iterable[str] = (),
    *,
    questions: bool = False,
    diagnosis: bool = True,
    then: Callable[[Any], Awaitable[None]] | None = None,
) -> Callable[[Any], Awaitable[None]]:
    """Open the test run with a hand-built diagnosis, then press ``keys`` one by one, letting each
    key's worker finish before the next (a trial, a patch); ``then`` does what must not wait for workers."""

    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await settle(app, pilot)
        if diagnosis:
            config = user_dir / "configs/qwen3_lora.yaml"
            facts = make_facts(config, gpu_source, phase="unknown" if questions else "first_batch")
            await show_diagnosis(
                app, pilot, facts, make_diagnosis(questions=questions), config, user_dir / "qwen3_lora.log"
            )
        for key in keys:
            await pilot.press(key)
            await settle(app, pilot)
        if then is not None:
            await then(pilot)
        for field in app.screen.query(Input):
            field.cursor_blink = False  # a blinking cursor would make the picture depend on timing

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_picker_with_nothing_found(
    snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any
) -> None:
    empty = user_dir / "empty"
    empty.mkdir()
    app = _app(empty, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(empty, gpu_source, diagnosis=False))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_proposal(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_next_alternative(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["n"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_facts(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["f"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_question(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, questions=True))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_explain(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["e"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_apply_dialog(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["a"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_applied_with_command(
    snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any
) -> None:
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["a", "enter"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_command_dialog(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    """Key c: the command to select with the terminal's own selection, how, and its command.sh."""
    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["a", "enter", "c"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_trial_steps_dialog(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    """Key t: how many steps (the schedule's default) and the probe switch, on as with the real runner."""
    app = _app(user_dir, gpu_source, lang)
    app.probe_supported = True
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["a", "enter", "t"]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_trial_finished(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang, trial_launcher=ScriptedTrial(outcome="oom"))
    assert snap_compare(
        app, terminal_size=size, run_before=_drive(user_dir, gpu_source, ["a", "enter", "t", "enter"])
    )


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_history(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    app = _app(user_dir, gpu_source, lang, trial_launcher=ScriptedTrial(outcome="oom"))
    keys = [
        "a",
        "enter",
        "t",
        "enter",
        "b",
        "h",
    ]  # b: back without Esc (a browser terminal keeps Esc for itself)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, keys))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_trial_running(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    """Live: memory against the card, utilisation, power, step counter, log tail, Stop in the footer."""
    launcher = ScriptedTrial(outcome="ok", wait_for_stop=True, hold_s=3.0)

    async def start_trial(pilot: Any) -> None:
        await pilot.press("t", "enter")
        assert launcher.started.wait(10)
        await pilot.pause()
        await pilot.pause()

    app = _app(user_dir, gpu_source, lang, trial_launcher=launcher)
    run_before = _drive(user_dir, gpu_source, ["a", "enter"], then=start_trial)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_error_dialog(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    (user_dir / "broken.yaml").write_text("model_name_or_path: [unclosed\n", encoding="utf-8")
    app = build_app(Path("broken.yaml"), None, lang, gpu_source, ScriptedTrial(), fixed_clock, cwd=user_dir)
    # the diagnosis screen's bar behind the dialog is indeterminate: drawn still, or its frame depends on timing
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, diagnosis=False))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_measuring_lengths(
    snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Key m: the measuring line with its progress bar above the footer, Esc to stop it."""
    import threading
    import time

    reported = threading.Event()

    def token_lengths(config: Any, *, cutoff_len: int | None = None, progress: Any = None) -> Any:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # halfway, until the app's exit cancels it (progress raises)
            progress(36, 72)
            reported.set()
            time.sleep(0.05)
        raise AssertionError("the app never stopped measuring")

    monkeypatch.setattr("oomdoctor.facts.dataset.token_lengths", token_lengths)

    async def press_m(pilot: Any) -> None:
        await pilot.press("m")
        assert reported.wait(10)
        await pilot.pause(0.2)

    app = _app(user_dir, gpu_source, lang)
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, then=press_m))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("lang", LANGS)
def test_trials_compared(snap_compare: Any, user_dir: Path, gpu_source: Any, lang: str, size: Any) -> None:
    """Change, try, still failing, diagnose the trial, change again, try: the two trials side by side."""
    app = _app(user_dir, gpu_source, lang, trial_launcher=ScriptedTrial(outcome="oom"))
    keys = ["a", "enter", "t", "enter", "d", "a", "enter", "t", "enter"]
    assert snap_compare(app, terminal_size=size, run_before=_drive(user_dir, gpu_source, keys))
