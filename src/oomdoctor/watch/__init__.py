"""Beside a running training: find it, follow its memory and its log, and warn before it runs out.

Headless (no textual): ``commands/watch.py`` prints its frames, ``tui/watch_screen.py`` draws them.
"""

from oomdoctor.watch.engine import LiveWarning, Observation, Plan, Pool, WarningEngine
from oomdoctor.watch.session import Watcher, run_is_live

__all__ = ["LiveWarning", "Observation", "Plan", "Pool", "WarningEngine", "Watcher", "run_is_live"]
