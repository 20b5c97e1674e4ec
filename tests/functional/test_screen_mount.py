"""A worker can report before the screen it redraws has composed (the first run's facts arrive while the
main screen is still being mounted): drawing then waits for the screen's own first draw at mount."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from functional.tui_helpers import fixed_clock, screen_text
from oomdoctor.tui.factory import build_app
from oomdoctor.tui.screens import MainScreen, PickerScreen
from oomdoctor.tui.session import HistoryEntry, TrialFeed
from oomdoctor.tui.trial_screen import TrialScreen


def _app(user_dir: Path, gpu_source: Any) -> Any:
    return build_app(lang="en", gpu_source=gpu_source, trial_launcher=lambda *a, **k: None, clock=fixed_clock,
                     cwd=user_dir, scan_at_start=False)  # fmt: skip


async def test_a_screen_asked_to_draw_before_it_is_mounted_waits_for_its_mount(
    user_dir: Path, gpu_source: Any
) -> None:
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        main, picker = MainScreen(), PickerScreen()
        await main.refresh_view()  # not composed yet: no "#tabs" to fill in, and no error either
        main.show_measuring()
        await picker.refresh_view()
        entry = HistoryEntry(folder=user_dir / "t", config_path=user_dir / "t/config.yaml", rule="r", title={},
                             changes={}, command="")  # fmt: skip
        trial = TrialScreen(TrialFeed(entry, user_dir / "t/trial-1", 0.0))
        trial.update_from_feed()  # a trial's first sample can come before its screen composed
        assert not (main.is_mounted or picker.is_mounted or trial.is_mounted)
        await app.push_screen(main)
        await pilot.pause()
        assert main.is_mounted and "Facts" in screen_text(app)  # its mount drew it
