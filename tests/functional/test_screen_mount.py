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


async def test_leaving_at_the_first_frame_while_the_demo_is_read_raises_nothing(gpu_source: Any) -> None:
    """Quitting as soon as the app has drawn (the start-up benchmark does; so does a user who presses q at once):
    the reading and diagnosing workers report while the screens are torn down, and their redraws find no widgets
    to fill in. That is no error (it was NoMatches on '#tabs', raised out of run_test)."""
    for _ in range(3):
        app = build_app(lang="en", demo=True, gpu_source=gpu_source, trial_launcher=lambda *a, **k: None)
        async with app.run_test(size=(100, 30)):
            pass  # leave at the first frame
        assert app.return_code in (None, 0)


async def test_a_screen_whose_widgets_are_gone_draws_nothing(user_dir: Path, gpu_source: Any) -> None:
    """The same race made certain: the main screen's widgets removed (as the app's exit does) before a worker's
    report asks it to redraw."""
    app = _app(user_dir, gpu_source)
    async with app.run_test(size=(80, 24)) as pilot:
        main = MainScreen()
        await app.push_screen(main)
        await pilot.pause()
        await main.remove_children()
        await main.refresh_view()  # no widgets to fill in: nothing to do, and no NoMatches
        assert not main.query("#tabs")
