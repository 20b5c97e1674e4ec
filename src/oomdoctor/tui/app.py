"""The interactive oomdoctor: a thin shell over the headless core.

The app owns every blocking call (scanning the folder, reading files, diagnosing, writing a patch,
running a trial) as a thread worker that reports back only by posting a past-tense message; one
``Worker.StateChanged`` handler turns any failure into an error dialog with a one-line message.
Screens are views over ``self.session`` (read through ``tui.base.DoctorHost``) and ask for work by posting
the request messages of ``tui.messages``, handled here; no screen imports this module. Build it with
``oomdoctor.tui.factory.build_app``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import App
from textual.message import Message
from textual.worker import Worker, WorkerState, get_current_worker

from oomdoctor.errors import BadInput
from oomdoctor.i18n import in_lang
from oomdoctor.tui import messages
from oomdoctor.tui.base import DoctorScreen
from oomdoctor.tui.bindings import bind, localize_bindings
from oomdoctor.tui.screens import ErrorScreen, MainScreen, PickerScreen
from oomdoctor.tui.session import HistoryEntry, Session, TrialFeed, facts_with_lengths
from oomdoctor.tui.strings import t
from oomdoctor.tui.widgets import QuestionPanel

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Diagnosis, Proposal
    from oomdoctor.discover import SavedSession, ScanResult
    from oomdoctor.facts.gpu import GpuSource
    from oomdoctor.facts.types import DataFacts
    from oomdoctor.patch import PatchResult
    from oomdoctor.rules.facts import Facts
    from oomdoctor.trial.runner import TrialProgress
    from oomdoctor.trial.sampler import SampleSnapshot

# oomdoctor.trial.run_trial: (config_path, *, steps, out_dir, source, on_sample, on_line, on_progress, stop,
# cwd) -> TrialResult
TrialLauncher = Callable[..., Any]
Clock = Callable[[], float]


def schedule_steps(facts: Facts | None, default: int) -> int:
    """A short trial's default length: as many steps as the run needed to reach its first validation or
    save (the trial moves both to its last step), at most ``default``."""
    config = facts.config if facts is not None else None
    marks = [
        int(v)
        for v in ((config.eval_steps if config.do_eval else None), config.save_steps)
        if isinstance(v, int | float) and v >= 1
    ] if config is not None else []  # fmt: skip
    return max(1, min([default, *marks]))


def last_error(log: Path) -> str | None:
    """What a trial that failed for another reason than memory died of: the log's last error line."""
    from oomdoctor.facts.log import read_log

    try:
        facts = read_log(log)
    except BadInput:
        return None
    return facts.other_error or facts.error_line


def missing_packages(rule_id: str) -> list[str]:
    """The packages the rule's change needs (its ``requires``) that this Python cannot find."""
    import importlib.util

    from oomdoctor.rules.loader import load_rules

    try:
        rules = load_rules()
    except Exception:  # a broken rule set is reported where it is loaded; nothing to check here
        return []
    if rule_id not in rules.by_id:
        return []
    return [
        req.package
        for req in rules.get(rule_id).requires
        if importlib.util.find_spec(req.module.split(".")[0]) is None
    ]


class MeasuringStopped(Exception):
    """Raised inside the lengths worker's progress callback once the worker is cancelled: the only point
    where LLaMA-Factory's tokenizing loop hands control back to us."""


class OomDoctorApp(App[int]):
    CSS_PATH = "oomdoctor.tcss"
    TITLE = "oomdoctor"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        bind("l", "toggle_lang", id="lang"),
        bind("q", "quit", id="quit"),
    ]

    # Past-tense messages posted by the workers below (the app is their sender).
    @dataclass
    class RunsFound(Message):
        scan: ScanResult
        at_start: bool
        saved: SavedSession | None = None  # what an earlier session left in the trials folder

    @dataclass
    class RunLoaded(Message):
        config: Path | None
        log: Path | None
        facts: Facts

    @dataclass
    class DiagnosisReady(Message):
        facts: Facts
        diagnosis: Diagnosis

    @dataclass
    class PatchWritten(Message):
        result: PatchResult
        proposal: Proposal
        parent: str | None

    @dataclass
    class TrialSampled(Message):
        """Many a second: only the newest pending one is handled (the feed keeps the history)."""

        snapshot: SampleSnapshot

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, OomDoctorApp.TrialSampled)

    @dataclass
    class TrialLogGrew(Message):
        """New lines are waiting in the feed; one pending notice is enough."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, OomDoctorApp.TrialLogGrew)

    @dataclass
    class LengthsProgressed(Message):
        """Tokenizing reports after every batch of samples: only the newest pending one matters."""

        done: int
        total: int | None

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, OomDoctorApp.LengthsProgressed)

    @dataclass
    class LengthsMeasured(Message):
        origin: Facts  # the facts the measurement started from: stale if another run opened since
        facts: Facts  # the same facts with the real lengths and the estimate rebuilt on them
        data: DataFacts

    @dataclass
    class TrialFinished(Message):
        feed: TrialFeed
        result: Any  # oomdoctor.trial.TrialResult
        comparison: Any  # oomdoctor.trial.Comparison

    def __init__(
        self,
        *,
        session: Session,
        gpu_source: GpuSource | None,
        trial_launcher: TrialLauncher,
        clock: Clock = time.monotonic,
        trial_steps: int = 20,
        scan_at_start: bool = False,
        launcher_program: str | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.gpu_source = gpu_source
        self.trial_launcher = trial_launcher
        self.clock = clock
        self.trial_steps = trial_steps
        self.scan_at_start = scan_at_start
        # The program the trial launcher starts (llamafactory-cli), checked before a trial; None for a
        # launcher that starts none (tests).
        self.launcher_program = launcher_program
        self.probe_supported = launcher_program is not None  # run_trial(probe=True); test launchers: off
        self.trial_feed: TrialFeed | None = None
        self.trial_stop: threading.Event | None = None
        # One tokenizing run at a time, even when a cancelled one has not reached its next check yet.
        self._measure_lock = threading.Lock()

    # Start-up ------------------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        localize_bindings(self, self.session.lang)
        self.push_screen(MainScreen())
        if self.session.config is not None or self.session.log is not None:
            self.open_run(self.session.config, self.session.log, is_demo=self.session.is_demo)
        else:
            self.push_screen(PickerScreen())
            self.scan_runs(at_start=self.scan_at_start)

    @property
    def main_screen(self) -> MainScreen:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("no main screen")  # pragma: no cover - pushed in on_mount

    def show_picker(self) -> None:
        if not isinstance(self.screen, PickerScreen):
            self.push_screen(PickerScreen())
        self.scan_runs(at_start=False)

    def open_run(
        self, config: Path | None, log: Path | None, *, is_demo: bool = False, watch: bool = True
    ) -> None:
        if watch and not is_demo and config is not None:
            from oomdoctor.watch import run_is_live

            if run_is_live(config, log):  # a process names it, or its log is still being written: watch it
                from oomdoctor.tui.watch_screen import WatchScreen

                self.push_screen(WatchScreen(config, log))
                return
        self.workers.cancel_group(self, "lengths")  # lengths belong to the run they were measured for
        self.session.open_run(config, log, is_demo=is_demo)
        self.call_later(self.main_screen.refresh_view)
        self.load_run(self.session.config, log)

    def restore_session(self, saved: SavedSession) -> None:
        """Reopened in a folder with a trials folder: the run that failed, the changes made from it and
        their trials, and the lengths measured then."""
        session = self.session
        session.open_run(saved.config, saved.log)
        session.restore(saved)
        self.call_later(self.main_screen.refresh_view)
        self.load_run(session.config, saved.log)

    # Workers ---------------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="scan")
    def scan_runs(self, at_start: bool = False) -> None:
        from oomdoctor.discover import find_runs, read_saved_session

        worker = get_current_worker()
        scan = find_runs(self.session.cwd, is_cancelled=lambda: worker.is_cancelled)
        saved = read_saved_session(self.session.cwd) if at_start else None
        if not worker.is_cancelled:
            self.post_message(self.RunsFound(scan, at_start, saved))

    @work(thread=True, exclusive=True, exit_on_error=False, group="diagnose")
    def load_run(self, config: Path | None, log: Path | None) -> None:
        from oomdoctor.api import gather
        from oomdoctor.rules.engine import diagnose

        facts = gather(config, log, gpu_source=self.gpu_source, **self.session.known)
        self.post_message(self.RunLoaded(config, log, facts))
        self.post_message(self.DiagnosisReady(facts, diagnose(facts)))

    @work(thread=True, exclusive=True, exit_on_error=False, group="diagnose")
    def rediagnose(self, facts: Facts) -> None:
        """Walk the nodes again with the answers given so far; the files are not read again."""
        from oomdoctor.rules.engine import diagnose

        self.post_message(self.DiagnosisReady(facts, diagnose(facts)))

    def measure_lengths(self) -> None:
        """Key m (and Apply on the "measure the lengths" proposal): tokenize the dataset in a worker, then
        diagnose again with the real lengths."""
        session = self.session
        if not session.can_measure or session.facts is None:
            return
        session.start_measuring()
        self.call_later(self.main_screen.refresh_view)
        self._measure(session.facts)

    def cancel_measuring(self) -> None:
        if self.session.measuring:
            self.workers.cancel_group(self, "lengths")

    @work(thread=True, exclusive=True, exit_on_error=False, group="lengths")
    def _measure(self, facts: Facts) -> None:
        from oomdoctor.facts.dataset import token_lengths

        worker = get_current_worker()
        config = facts.config
        if config is None:  # pragma: no cover - measure_lengths checks it
            return

        def progress(done: int, total: int | None) -> None:
            if worker.is_cancelled:
                raise MeasuringStopped
            self.post_message(self.LengthsProgressed(done, total))

        with self._measure_lock:
            if worker.is_cancelled:
                return
            try:
                data = token_lengths(config, progress=progress)
            except MeasuringStopped:
                return
        if worker.is_cancelled:
            return
        self._keep_lengths(data)
        self.post_message(self.LengthsMeasured(facts, facts_with_lengths(facts, data), data))

    def _keep_lengths(self, data: DataFacts) -> None:
        """Measured lengths of the run that failed are kept in the trials folder (not the demo's: it has
        its own), so coming back does not tokenize again."""
        from oomdoctor.discover import save_lengths
        from oomdoctor.facts.types import to_jsonable

        session = self.session
        if not session.is_demo and session.parent_trial is None and session.config == session.origin_config:
            save_lengths(session.cwd, to_jsonable(data))

    @work(thread=True, exclusive=True, exit_on_error=False, group="patch")
    def write_patch(self, proposal: Proposal, folder: Path) -> None:
        from oomdoctor.patch import write_patched_config

        config = self.session.config
        if config is None:
            raise BadInput(t("proposal_no_config", self.session.lang))
        parent = self.session.trial_parent()
        result = write_patched_config(config, proposal, folder, parent=parent)
        self._remember_run(Path(result.folder))
        self.post_message(self.PatchWritten(result, proposal, parent))

    def _remember_run(self, folder: Path) -> None:
        """The trials folder remembers the run that failed, for the next time oomdoctor opens here."""
        from oomdoctor.discover import TRIALS_DIR_NAME, save_session

        session = self.session
        if (
            folder.parent == session.cwd / TRIALS_DIR_NAME
            and session.origin_log is not None
            and not session.is_demo
        ):
            save_session(session.cwd, session.origin_config, session.origin_log)

    @work(thread=True, exclusive=True, exit_on_error=False, group="trial")
    def run_trial(self, feed: TrialFeed, stop: threading.Event) -> None:
        from oomdoctor.tui.comparison import compare_run_trials

        entry = feed.entry

        def on_sample(snapshot: SampleSnapshot) -> None:
            feed.add_sample(snapshot)
            self.post_message(self.TrialSampled(snapshot))

        def on_line(line: str) -> None:
            feed.add_line(line)
            self.post_message(self.TrialLogGrew())

        def on_progress(progress: TrialProgress) -> None:
            feed.set_progress(progress)
            self.post_message(self.TrialLogGrew())

        launch = dict(out_dir=feed.out_dir, source=self.gpu_source, on_sample=on_sample, on_line=on_line,
                      on_progress=on_progress, stop=stop, cwd=entry.run_dir)  # fmt: skip
        if feed.probe:
            try:
                result = self.trial_launcher(entry.config_path, steps=feed.steps, probe=True, **launch)
            except BadInput as err:  # no probe here (data not local, no tokenizer): the plain trial instead
                feed.probe_note = in_lang(err, self.session.lang)
                feed.probe, feed.steps = False, self.trial_steps
                on_line(t("trial_probe_fallback", self.session.lang, reason=feed.probe_note))
                result = self.trial_launcher(entry.config_path, steps=feed.steps, **launch)
        else:
            result = self.trial_launcher(entry.config_path, steps=feed.steps, **launch)
        if getattr(result, "outcome", None) == "failed":
            feed.failure = last_error(feed.out_dir / "train.log")
        # Every trial of this run side by side (oldest first); one that wrote no result.json (it could not
        # start) is left out, and the result line says why.
        dirs = self.session.trial_dirs()
        if feed.out_dir not in dirs:
            dirs.append(feed.out_dir)
        comparison = compare_run_trials(dirs) if (feed.out_dir / "result.json").is_file() else None
        self.post_message(self.TrialFinished(feed, result, comparison))

    def ask_trial(self, entry: HistoryEntry) -> None:
        """Key t: how many steps, and whether to probe (longest samples first), then the trial."""
        from oomdoctor.tui.screens import TrialStepsScreen

        if self.trial_feed is not None and not self.trial_feed.done:
            return
        blocker = self.trial_blocker(entry)
        if blocker is not None:  # it cannot work: say what to install instead of failing on the import
            self.push_screen(ErrorScreen(blocker, title=t("trial_blocked_title", self.session.lang)))
            return
        default = schedule_steps(self.session.facts, self.trial_steps)

        def chosen(answer: object) -> None:
            if isinstance(answer, tuple):
                steps, probe = answer
                self.start_trial(entry, steps=int(steps), probe=bool(probe))

        self.push_screen(TrialStepsScreen(default, probe=self.probe_supported), chosen)

    def start_trial(self, entry: HistoryEntry, *, steps: int | None = None, probe: bool = False) -> None:
        """A short trial of a written change, in a new folder inside it; one trial at a time."""
        from oomdoctor.discover import trial_run_folder
        from oomdoctor.tui.trial_screen import TrialScreen

        if self.trial_feed is not None and not self.trial_feed.done:
            return
        blocker = self.trial_blocker(entry)
        if blocker is not None:  # it cannot work: say what to install instead of failing on the import
            self.push_screen(ErrorScreen(blocker, title=t("trial_blocked_title", self.session.lang)))
            return
        feed = TrialFeed(entry, trial_run_folder(entry.folder), self.clock())
        feed.steps, feed.probe = steps or self.trial_steps, probe
        stop = threading.Event()
        self.trial_feed, self.trial_stop = feed, stop
        entry.outcome = "running"
        entry.trial_dirs.append(feed.out_dir)
        self.push_screen(TrialScreen(feed))
        self.run_trial(feed, stop)

    def trial_blocker(self, entry: HistoryEntry) -> str | None:
        """Why a trial of this change cannot work here, in one message, or None: LLaMA-Factory's command
        is missing, or the change needs a package that is not installed."""
        lang = self.session.lang
        if self.launcher_program is not None:
            import os

            from oomdoctor.trial.runner import resolve_program

            if resolve_program(self.launcher_program, os.environ.get("PATH")) is None:
                return t("trial_no_llamafactory", lang, program=self.launcher_program)
        missing = missing_packages(entry.rule)
        if missing:
            return t("trial_missing_packages", lang, packages=", ".join(missing), pip=" ".join(missing))
        return None

    def stop_trial(self) -> None:
        """Stop only the trial this app launched: the core stops its process group."""
        if self.trial_stop is not None:
            self.trial_stop.set()

    # Worker results ---------------------------------------------------------------------------------------------
    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """The one place failures surface: an error dialog with the one-line message."""
        if event.worker.group == "lengths" and event.state == WorkerState.CANCELLED:
            if self.session.measuring:
                self.session.stop_measuring()
                self.notify(t("measure_stopped", self.session.lang))
                self.call_later(self.main_screen.refresh_view)
            return
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, BadInput):
            message = in_lang(error, self.session.lang)
        else:
            message = t("error_unexpected", self.session.lang, kind=type(error).__name__, detail=error)
        if event.worker.group == "diagnose":
            self.session.loading = False
            self.call_later(self.main_screen.refresh_view)
        if event.worker.group == "lengths":
            self.session.stop_measuring()
            self.call_later(self.main_screen.refresh_view)
        if event.worker.group == "trial" and self.trial_feed is not None:
            self.trial_feed.finish(None, None, error=message)
            self.trial_feed.entry.outcome = "failed"
            self.call_later(self._refresh_trial_screen)
        self.push_screen(ErrorScreen(message))

    @on(RunsFound)
    async def _runs_found(self, event: RunsFound) -> None:
        self.session.scan = event.scan
        if event.at_start and event.saved is not None and isinstance(self.screen, PickerScreen):
            self.pop_screen()
            self.restore_session(event.saved)
            return
        if event.at_start and event.scan.runs and isinstance(self.screen, PickerScreen):
            newest = event.scan.runs[0]
            self.pop_screen()
            self.open_run(newest.config, newest.log)
            return
        if isinstance(self.screen, PickerScreen):
            await self.screen.refresh_view()

    @on(PickerScreen.RunPicked)
    def _run_picked(self, event: PickerScreen.RunPicked) -> None:
        if isinstance(self.screen, PickerScreen):
            self.pop_screen()
        self.open_run(event.config, event.log, is_demo=event.is_demo)

    @on(RunLoaded)
    async def _run_loaded(self, event: RunLoaded) -> None:
        self.session.facts = event.facts
        self.session.remember_origin(event.log, event.facts)
        await self.main_screen.refresh_view()

    @on(DiagnosisReady)
    async def _diagnosis_ready(self, event: DiagnosisReady) -> None:
        self.session.set_diagnosis(event.facts, event.diagnosis)
        await self.main_screen.refresh_view()

    @on(LengthsProgressed)
    def _lengths_progressed(self, event: LengthsProgressed) -> None:
        session = self.session
        if session.measuring:
            session.measure_done, session.measure_total = event.done, event.total
            self.main_screen.show_measuring()

    @on(LengthsMeasured)
    def _lengths_measured(self, event: LengthsMeasured) -> None:
        """The real lengths replace what was assumed; the engine walks the nodes again on them."""
        session = self.session
        if session.facts is not event.origin:  # another run was opened meanwhile
            return
        session.stop_measuring()
        session.facts = event.facts
        session.known["data"] = event.data  # kept for this run's changes and their trials
        session.proposal_index = 0  # the proposals change with the lengths: start from the first
        data = event.data
        self.notify(
            t(
                "measure_done",
                session.lang,
                samples=data.samples if data.samples is not None else "?",
                longest=data.max_tokens if data.max_tokens is not None else "?",
                truncated=data.truncated if data.truncated is not None else "?",
                cutoff=data.cutoff_len if data.cutoff_len is not None else "?",
            )
        )
        self.call_later(self.main_screen.refresh_view)
        self.rediagnose(event.facts)

    @on(QuestionPanel.Answered)
    def _answered(self, event: QuestionPanel.Answered) -> None:
        facts = self.session.facts
        if facts is None:
            return
        self.rediagnose(facts.with_answers({event.key: event.value}))

    @on(QuestionPanel.Skipped)
    async def _skipped(self, event: QuestionPanel.Skipped) -> None:
        self.session.skipped.add(event.key)
        await self.main_screen.refresh_view()

    @on(PatchWritten)
    async def _patch_written(self, event: PatchWritten) -> None:
        session = self.session
        result, proposal = event.result, event.proposal
        session.patch, session.patch_rule = result, proposal.rule
        session.history.append(
            HistoryEntry(
                folder=Path(result.folder),
                config_path=Path(result.config_path),
                rule=proposal.rule,
                title=proposal.title,
                changes=dict(proposal.changes),
                command=result.command,
                parent=event.parent,
                run_dir=Path(result.run_dir) if result.run_dir is not None else None,
                estimate_mib=proposal.effect.after_mib if proposal.effect is not None else None,
            )
        )
        await self.main_screen.refresh_view()

    @on(TrialSampled)
    @on(TrialLogGrew)
    def _trial_progress(self) -> None:
        self._refresh_trial_screen()

    @on(TrialFinished)
    async def _trial_finished(self, event: TrialFinished) -> None:
        feed = event.feed
        feed.finish(event.result, event.comparison)
        feed.entry.outcome = feed.outcome or "failed"
        feed.entry.peak_mib = feed.peak_mib
        self._refresh_trial_screen()
        await self.main_screen.refresh_view()

    def _refresh_trial_screen(self) -> None:
        from oomdoctor.tui.trial_screen import TrialScreen

        for screen in self.screen_stack:
            if isinstance(screen, TrialScreen):
                screen.update_from_feed()

    def rediagnose_trial(self, feed: TrialFeed) -> None:
        """The trial still failed: its train.log and config become the run on screen (the config it was
        made from, see ``Session.open_run``), and the trial is the parent of the next change."""
        log = feed.out_dir / "train.log"
        config = feed.out_dir / "config.yaml"
        self.open_run(config if config.is_file() else feed.entry.config_path, log if log.is_file() else None)

    # Requests from the screens (oomdoctor.tui.messages) -----------------------------------------------------
    @on(messages.ApplyRequested)
    def _apply_requested(self, event: messages.ApplyRequested) -> None:
        self.write_patch(event.proposal, event.folder)

    @on(messages.TrialRequested)
    def _trial_requested(self, event: messages.TrialRequested) -> None:
        self.ask_trial(event.entry)

    @on(messages.ProposalStepped)
    async def _proposal_stepped(self, event: messages.ProposalStepped) -> None:
        self.session.next_proposal(step=event.step)
        await self.main_screen.refresh_view()

    @on(messages.MeasureRequested)
    def _measure_requested(self) -> None:
        self.measure_lengths()

    @on(messages.MeasureCancelRequested)
    def _measure_cancel_requested(self) -> None:
        self.cancel_measuring()

    @on(messages.CompareRequested)
    def _compare_requested(self) -> None:
        from oomdoctor.tui.comparison import ComparisonScreen

        self.push_screen(ComparisonScreen())

    @on(messages.RunsRequested)
    def _runs_requested(self) -> None:
        self.show_picker()

    @on(messages.TrialStopRequested)
    def _trial_stop_requested(self) -> None:
        self.stop_trial()

    @on(messages.TrialRediagnoseRequested)
    def _trial_rediagnose_requested(self, event: messages.TrialRediagnoseRequested) -> None:
        self.rediagnose_trial(event.feed)

    @on(messages.DiagnoseRequested)
    def _diagnose_requested(self, event: messages.DiagnoseRequested) -> None:
        self.open_run(event.config, event.log, watch=False)

    # App actions -----------------------------------------------------------------------------------------------
    async def action_toggle_lang(self) -> None:
        self.session.lang = "zh" if self.session.lang == "en" else "en"
        localize_bindings(self, self.session.lang)
        for screen in self.screen_stack:
            if isinstance(screen, DoctorScreen):
                await screen.relabel()
        self.refresh_bindings()

    async def action_quit(self) -> None:
        self.exit(0)

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None:
        """However the app ends, the trial it launched is stopped with it (never any other process)."""
        self.stop_trial()
        super().exit(result, return_code, message)
