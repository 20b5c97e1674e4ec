"""What the TUI remembers during one session: the run on screen, its diagnosis, and the changes written.

Plain data (no textual), so the screens stay views over it and tests can read it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.demo import demo_known
from oomdoctor.i18n import Lang
from oomdoctor.text import Text
from oomdoctor.tui.render import proposals_of

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Diagnosis, Proposal, Question
    from oomdoctor.discover import SavedChange, SavedSession, ScanResult
    from oomdoctor.facts.types import DataFacts
    from oomdoctor.patch import PatchResult
    from oomdoctor.rules.facts import Facts

# The rule that tells the user to measure the real lengths: in the TUI, Apply measures them instead of
# writing a folder (the rule is manual advice for the command line).
MEASURE_LENGTHS_RULE = "long_sample.measure_lengths"

# Outcomes a history entry moves through: written -> running -> passed / oom / failed / stopped / timeout.
OUTCOMES = ("written", "running", "passed", "oom", "failed", "stopped", "timeout")


@dataclass
class HistoryEntry:
    """One change written in this session: one trial folder."""

    folder: Path
    config_path: Path
    rule: str
    title: Text
    changes: dict[str, list[Any]]
    command: str
    parent: str | None = None  # the trial folder this one was derived from, when it was a trial
    run_dir: Path | None = None  # where the command runs (relative paths in the config resolve there)
    outcome: str = "written"
    peak_mib: float | None = None
    trial_dirs: list[Path] = field(default_factory=list)  # short trials of this change, oldest first
    estimate_mib: float | None = None  # the proposal's estimated peak after the change (the chart's line)


@dataclass
class Session:
    cwd: Path
    lang: Lang = "en"
    config: Path | None = None
    log: Path | None = None
    is_demo: bool = False
    facts: Facts | None = None
    diagnosis: Diagnosis | None = None
    skipped: set[str] = field(default_factory=set)  # questions the user chose not to answer
    proposal_index: int = 0
    patch: PatchResult | None = None  # the change written for the proposal on screen
    patch_rule: str | None = None
    history: list[HistoryEntry] = field(default_factory=list)
    scan: ScanResult | None = None
    loading: bool = False
    parent_trial: Path | None = None  # set by open_run when the run is a trial's
    # The run that failed first (not a trial's): the comparison's baseline row, read from its log.
    origin_config: Path | None = None
    origin_log: Path | None = None
    origin_log_facts: Any = None  # oomdoctor.facts.types.LogFacts
    # What the user told us beyond the files (api.gather keywords: lengths_file, longest_tokens, answers...).
    # It belongs to the run it came with: opening another run forgets it.
    known: dict[str, Any] = field(default_factory=dict)
    # Measuring the real lengths (key m): samples tokenized so far and how many there are (None: loading).
    measuring: bool = False
    measure_done: int = 0
    measure_total: int | None = None
    restored: bool = False  # the history came from the trials folder of an earlier session

    def open_run(self, config: Path | None, log: Path | None, *, is_demo: bool = False) -> None:
        """Forget the previous run's diagnosis (history stays: it is the session's). A trial's config is
        swapped for the config it was made from; the trial becomes the parent of the next change."""
        from oomdoctor.discover import trial_origin

        self.parent_trial = None
        same_run = (config, log, is_demo) == (self.config, self.log, self.is_demo)
        if config is not None:
            config, self.parent_trial = trial_origin(config)
        if not same_run and not self._descends_from_this_session(config):
            self.known = demo_known() if is_demo else {}
        self.config, self.log, self.is_demo = config, log, is_demo
        self.facts = None
        self.diagnosis = None
        self.skipped = set()
        self.proposal_index = 0
        self.patch = None
        self.patch_rule = None
        self.loading = True
        self.stop_measuring()

    def start_measuring(self) -> None:
        self.measuring, self.measure_done, self.measure_total = True, 0, None

    def stop_measuring(self) -> None:
        self.measuring, self.measure_done, self.measure_total = False, 0, None

    @property
    def can_measure(self) -> bool:
        """A config to read the dataset from, its facts read, and no measurement already running."""
        return self.facts is not None and self.facts.config is not None and not self.measuring

    @property
    def proposal_measures(self) -> bool:
        """The proposal on screen is "measure the real lengths": Apply measures them here."""
        current = self.current_proposal
        return current is not None and current.rule == MEASURE_LENGTHS_RULE

    def _descends_from_this_session(self, config: Path | None) -> bool:
        """A change written in this session (or its trial) trains on the same data: what the user told us,
        and the lengths measured here, still hold for it."""
        return config is not None and any(config == entry.config_path for entry in self.history)

    def set_diagnosis(self, facts: Facts, diagnosis: Diagnosis) -> None:
        self.facts, self.diagnosis = facts, diagnosis
        self.loading = False
        count = len(self.proposals)
        self.proposal_index = min(self.proposal_index, count - 1) if count else 0
        current = self.current_proposal
        if self.patch_rule is not None and current is not None and current.rule != self.patch_rule:
            self.patch, self.patch_rule = None, None

    @property
    def proposals(self) -> list[Proposal]:
        return proposals_of(self.diagnosis)

    @property
    def current_proposal(self) -> Proposal | None:
        proposals = self.proposals
        return proposals[self.proposal_index] if proposals else None

    @property
    def pending_questions(self) -> list[Question]:
        """Questions neither answered nor skipped, in the engine's order."""
        if self.diagnosis is None:
            return []
        answered = self.facts.answers if self.facts is not None else {}
        return [q for q in self.diagnosis.questions if q.key not in answered and q.key not in self.skipped]

    def apply_enabled(self) -> bool | None:
        """True: Apply does something; None: shown but disabled (manual advice, no config, measuring)."""
        proposal = self.current_proposal
        if proposal is None or self.config is None:
            return None
        if proposal.rule == MEASURE_LENGTHS_RULE:
            return True if self.can_measure else None
        return None if proposal.manual else True

    def next_proposal(self, step: int = 1) -> None:
        count = len(self.proposals)
        if count:
            self.proposal_index = (self.proposal_index + step) % count
        current = self.current_proposal
        if current is None or current.rule != self.patch_rule:
            self.patch, self.patch_rule = None, None

    def questions_done(self) -> int:
        """Questions of this run already answered or skipped (numbering goes on across diagnoses)."""
        answered = set(self.facts.answers) if self.facts is not None else set()
        return len(answered | self.skipped)

    def same_change_written(self, proposal: Proposal) -> Path | None:
        """The folder where this very change was already written from the same run, if any."""
        parent = self.trial_parent()
        for entry in self.history:
            if (
                entry.rule == proposal.rule
                and entry.changes == dict(proposal.changes)
                and entry.parent == parent
            ):
                return entry.folder
        return None

    def trial_parent(self) -> str | None:
        """The trial folder the run on screen came from: the next change is compared with it."""
        return str(self.parent_trial) if self.parent_trial is not None else None

    def remember_origin(self, log: Path | None, facts: Facts) -> None:
        """The first run opened that is not a trial's is the baseline the trials are compared with."""
        if (
            self.parent_trial is None
            and facts.log is not None
            and not self._descends_from_this_session(self.config)
        ):
            self.origin_config, self.origin_log, self.origin_log_facts = self.config, log, facts.log

    def restore(self, saved: SavedSession) -> None:
        """Come back to what an earlier session left in the trials folder: its changes and their trials
        become this session's history (the run itself is opened by the app)."""
        self.history = [entry_from_disk(change) for change in saved.changes]
        if saved.lengths_file is not None:
            self.known = {"lengths_file": saved.lengths_file}
        self.restored = True

    def trial_dirs(self) -> list[Path]:
        """Every trial of this run, oldest first."""
        return [folder for entry in self.history for folder in entry.trial_dirs]

    def entry_for(self, folder: Path) -> HistoryEntry | None:
        for entry in self.history:
            if entry.folder == folder:
                return entry
        return None


def _after_mib(effect: Any) -> float | None:
    value = effect.get("after_mib") if isinstance(effect, dict) else None
    return float(value) if isinstance(value, int | float) else None


def entry_from_disk(change: SavedChange) -> HistoryEntry:
    """A change folder an earlier session wrote, with the outcome and peak of its latest trial."""
    from oomdoctor.discover import read_small_json

    record = change.record
    entry = HistoryEntry(
        folder=change.folder,
        config_path=change.config,
        rule=str(record.get("rule") or change.folder.name),
        title=Text.of(record.get("title") or {}),
        changes=dict(record.get("changes") or {}),
        command=str(record.get("command") or ""),
        parent=change.parent,
        run_dir=Path(record["run_dir"]) if record.get("run_dir") else None,
        trial_dirs=list(change.trials),
        estimate_mib=_after_mib(record.get("effect")),
    )
    for trial in reversed(change.trials):
        result = read_small_json(trial / "result.json")
        if result is None:
            continue
        outcome = str(result.get("outcome") or "failed")
        entry.outcome = {"ok": "passed", "timed_out": "timeout"}.get(outcome, outcome)
        if entry.outcome not in OUTCOMES:
            entry.outcome = "failed"
        peak = result.get("peak_memory_mib")
        entry.peak_mib = float(peak) if isinstance(peak, int | float) else None
        break
    return entry


def facts_with_lengths(facts: Facts, data: DataFacts) -> Facts:
    """The same readings with measured lengths, assembled again: the estimate is rebuilt on them (on the
    card the facts settled) and the derived facts follow."""
    return facts.with_data(data)


def gpu_reason(session: Session, gpu_source: object) -> str | None:
    """Why there is no GPU, in the interface language, when the GPU source can say it in one language
    (``GpuFacts.reason`` holds both, for JSON). Asked only after the facts were read, so NVML has
    already been tried: this never starts NVML on the UI thread."""
    facts = session.facts
    if facts is None or facts.gpu is None or facts.gpu.available:
        return None
    reason_in = getattr(gpu_source, "reason_in", None)
    reason = reason_in(session.lang) if callable(reason_in) else None
    return str(reason) if reason is not None else None


TRIAL_HISTORY_SAMPLES = 600  # what the charts can show: 2 minutes at 200 ms
TRIAL_LOG_LINES = 2000


# A probe's milestone (result.json ``milestones``) -> the chart mark it draws
MILESTONE_MARKS = {
    "longest_batch": "longest_batch",
    "optimizer_step": "update",
    "eval": "eval",
    "save": "save",
}


def probe_milestones(folder: Path) -> dict[str, dict[str, Any]]:
    """The milestones a probe passed (``result.json``), keyed by mark name, each with its ``time_s``
    (the sampler's clock), ``step`` and ``peak_mib``; empty for a plain trial or an unreadable result."""
    from oomdoctor.errors import BadInput
    from oomdoctor.inputs import read_json_object
    from oomdoctor.trial.folder import TrialFolder

    try:
        record = read_json_object(TrialFolder.at(folder).result, what="trial result")
    except (BadInput, OSError):
        return {}
    items = record.get("milestones")
    marks: dict[str, dict[str, Any]] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("passed") is not True:
            continue
        name, time_s = MILESTONE_MARKS.get(str(item.get("name"))), item.get("time_s")
        if name is not None and isinstance(time_s, int | float) and not isinstance(time_s, bool):
            marks[name] = {
                "time_s": float(time_s),
                "step": item.get("step"),
                "peak_mib": item.get("peak_mib"),
            }
    return marks


def line_context(line: str) -> str | None:
    """``eval`` / ``save`` / ``train`` / ``load`` when a log line marks that phase starting (the log
    reader's markers, ``facts/log_markers.yaml``), else None."""
    from oomdoctor.facts.log_tables import tables

    for marker in tables().markers:
        if marker.context in ("load", "train", "eval", "save") and marker.pattern.search(line):
            return marker.context
    return None


class TrialFeed:
    """What a running trial has reported, filled from the trial's threads and drained by the UI.

    The trial calls ``add_sample``/``add_line``/``set_progress`` from its own threads; the app posts a
    coalescing message and the trial screen reads the whole history here, so no sample or line is lost
    when messages are merged.
    """

    def __init__(self, entry: HistoryEntry, out_dir: Path, started_s: float) -> None:
        import threading
        from collections import deque

        self.entry = entry
        self.out_dir = out_dir
        self.started_s = started_s
        self._lock = threading.Lock()
        self.samples: deque[Any] = deque(maxlen=TRIAL_HISTORY_SAMPLES)  # SampleSnapshot
        self._new_lines: deque[str] = deque(maxlen=TRIAL_LOG_LINES)
        self.progress: Any = None  # oomdoctor.trial.TrialProgress
        self.stopping = False
        self.done = False
        self.result: Any = None  # oomdoctor.trial.TrialResult
        self.comparison: Any = None  # oomdoctor.trial.Comparison
        self.error: str | None = None
        self.failure: str | None = None  # a trial that failed for another reason: its log's last error
        self.steps = 0  # optimizer steps asked for
        self.probe = False  # the longest samples first (run_trial(probe=True))
        self.probe_note: str | None = None  # why the probe could not run here
        # Where the first update, the first validation and the first save happened (sampler seconds), and
        # the phase the log says is running now: the chart marks them.
        self.marks: dict[str, float] = {}
        self.milestones: dict[str, dict[str, Any]] = {}  # a probe's passed milestones, by mark name
        self.phase: str | None = None
        self.all_lines: deque[str] = deque(maxlen=TRIAL_LOG_LINES)  # the whole tail, to unfold the log

    def add_sample(self, snapshot: Any) -> None:
        with self._lock:
            self.samples.append(snapshot)

    def add_line(self, line: str) -> None:
        context = line_context(line)
        with self._lock:
            self._new_lines.append(line)
            self.all_lines.append(line)
            if context is not None:
                self.phase = context
                if context not in self.marks:
                    self.marks[context] = self._now_s()

    def set_progress(self, progress: Any) -> None:
        with self._lock:
            self.progress = progress
            if progress is not None and (progress.steps_done or 0) >= 1 and "update" not in self.marks:
                self.marks["update"] = self._now_s()
                self.phase = self.phase or "train"

    def _now_s(self) -> float:
        """The sampler's clock (the chart's x axis): the newest sample's time."""
        return self.samples[-1].time_s if self.samples else 0.0

    def eta_s(self) -> float | None:
        """Seconds left at the pace so far: elapsed per finished step times the steps left."""
        progress = self.progress
        if progress is None or not progress.steps_done or not progress.total_steps:
            return None
        left = max(0, int(progress.total_steps) - int(progress.steps_done))
        return float(progress.elapsed_s) / int(progress.steps_done) * left

    def drain_lines(self) -> list[str]:
        with self._lock:
            lines = list(self._new_lines)
            self._new_lines.clear()
        return lines

    def snapshot_history(self) -> list[Any]:
        with self._lock:
            return list(self.samples)

    def finish(self, result: Any, comparison: Any, *, error: str | None = None) -> None:
        folder = getattr(result, "folder", None) or self.out_dir
        milestones = probe_milestones(Path(folder)) if result is not None else {}
        with self._lock:
            self.done = True
            self.result, self.comparison, self.error = result, comparison, error
            if milestones:  # the probe timed each milestone itself: its marks replace the log's guesses
                self.milestones = milestones
                self.marks = {name: float(m["time_s"]) for name, m in milestones.items()}

    @property
    def outcome(self) -> str | None:
        """The history's word for the trial result (``result.json``'s ``outcome``)."""
        if not self.done:
            return "running"
        if self.result is None:
            return "failed"
        outcome = str(self.result.outcome)
        return {"ok": "passed", "timed_out": "timeout"}.get(outcome, outcome)

    @property
    def failed(self) -> bool:
        """It ran and still did not get through (out of memory or another failure): worth diagnosing.
        A stopped or timed-out trial did not fail; a trial that could not start has nothing to read."""
        return self.done and self.result is not None and self.result.outcome in ("oom", "failed")

    @property
    def peak_mib(self) -> float | None:
        if self.result is not None and self.result.peak_memory_mib is not None:
            return float(self.result.peak_memory_mib)
        with self._lock:
            last = self.samples[-1] if self.samples else None
        return last.peak_mib if last is not None else None
