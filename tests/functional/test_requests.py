"""The screens ask the app for work only by the messages of ``tui/messages.py``: each has its handler in the
app, and a message posted on a screen reaches it (the screens bubble up to the app)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from textual.message import Message

from functional.tui_helpers import fixed_clock
from oomdoctor.tui import messages
from oomdoctor.tui.app import OomDoctorApp
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import PickerScreen


def _requests() -> list[type[Message]]:
    return [
        cls
        for _, cls in inspect.getmembers(messages, inspect.isclass)
        if issubclass(cls, Message) and cls.__module__ == messages.__name__
    ]


def test_every_request_has_its_handler_in_the_app() -> None:
    requests = _requests()
    assert len(requests) >= 8, requests
    handled = set(OomDoctorApp._decorated_handlers)
    assert [r.__name__ for r in requests if r not in handled] == []


async def test_a_request_posted_on_a_screen_reaches_the_app(user_dir: Path, gpu_source: Any) -> None:
    """Key r's request, posted on the main screen, opens the picker (the app's handler ran)."""
    app = build_app(lang="en", gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                    cwd=user_dir, config=user_dir / "configs/qwen3_lora.yaml", scan_at_start=False)  # fmt: skip
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not isinstance(app.screen, PickerScreen)
        app.screen.post_message(messages.RunsRequested())
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
