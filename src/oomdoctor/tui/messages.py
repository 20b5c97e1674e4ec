"""What the screens ask of the app, as messages that bubble up to it (``OomDoctorApp.on_...`` handles them).

The screens never call the app: they post one of these and the app, which owns the workers and the screen
stack, does the work. This module imports nothing of the app or its screens, so every screen can use it.
A screen that leaves the stack as it asks (``dismiss``, ``pop_screen``) posts to the app itself, so the
request outlives the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Proposal
    from oomdoctor.tui.session import HistoryEntry, TrialFeed


@dataclass
class ApplyRequested(Message):
    """Write the proposal's change into a new folder (the user chose it in the Apply dialog)."""

    proposal: Proposal
    folder: Path


@dataclass
class TrialRequested(Message):
    """Key t: ask how many steps, then run a short trial of a written change."""

    entry: HistoryEntry


@dataclass
class ProposalStepped(Message):
    """Keys n / N: the next (1) or the previous (-1) alternative change."""

    step: int


class MeasureRequested(Message):
    """Key m (or Apply on "measure the real lengths"): tokenize the dataset and diagnose again."""


class MeasureCancelRequested(Message):
    """Key s / Esc while measuring: stop tokenizing."""


class CompareRequested(Message):
    """Key v: every trial of this run side by side."""


class RunsRequested(Message):
    """Key r: the picker, with the runs in this folder scanned again."""


class TrialStopRequested(Message):
    """Key s on the trial screen: stop the trial this app launched."""


@dataclass
class TrialRediagnoseRequested(Message):
    """Key d after a failed trial: its log and config become the run on screen."""

    feed: TrialFeed


@dataclass
class DiagnoseRequested(Message):
    """Key d in watch mode: open the run's log in the diagnosis view, without watching it again."""

    config: Path
    log: Path | None
