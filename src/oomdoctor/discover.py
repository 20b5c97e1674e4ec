"""Find training runs in the folder where the user typed ``oomdoctor``: configs and logs, newest first.

LLaMA-Factory writes its output under ``saves/...`` (``training_args.yaml``, ``running_log.txt``,
``trainer_log.jsonl``); people keep configs under ``configs/`` or ``examples/`` and capture the console in
``*.log`` or ``nohup.out``. A config and a log that sit in the same folder (or share a file stem) are one
run. The scan is bounded (depth and entries) and cancellable, because a user may start us in ``$HOME``.

Headless: no textual. The TUI runs ``find_runs`` in a thread worker.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What a LLaMA-Factory training config always holds; a YAML without it is someone else's file.
CONFIG_MARKER_KEYS: tuple[str, ...] = ("model_name_or_path",)
# ...and says what to do with it: a data file that merely mentions a model (a package's table, a model
# card's metadata) has none of these at its top level.
TRAINING_KEYS: tuple[str, ...] = ("stage", "finetuning_type", "do_train", "output_dir", "dataset", "template")
# How much of a YAML to read when checking for those keys.
CONFIG_SNIFF_BYTES = 16 * 1024
# Log files by exact name, in order of preference when several sit in one folder: the console capture
# holds the traceback; trainer_log.jsonl only holds step records.
LOG_NAMES: tuple[str, ...] = ("running_log.txt", "train.log", "nohup.out", "trainer_log.jsonl")
LOG_SUFFIXES: tuple[str, ...] = (".log",)
# Files LLaMA-Factory writes into its output folder: one run's, whichever of them we show.
RUN_FOLDER_LOG_NAMES: tuple[str, ...] = ("running_log.txt", "trainer_log.jsonl")
CONFIG_SUFFIXES: tuple[str, ...] = (".yaml", ".yml")
# Folders never worth entering: VCS data, environments, caches, model checkpoints (big, no configs).
SKIP_DIR_NAMES: frozenset[str] = frozenset(
    {"node_modules", "__pycache__", "site-packages", "dist-packages", "wandb", "runs", "tensorboard"}
)
SKIP_DIR_PREFIXES: tuple[str, ...] = (".", "venv", "checkpoint-", "global_step")
# Where runs usually are: LLaMA-Factory's output (saves/), configs, its examples, oomdoctor's trials.
PREFERRED_DIR_NAMES: frozenset[str] = frozenset(
    {"saves", "configs", "examples", "trials", "output", "outputs"}
)

DEFAULT_MAX_DEPTH = 6
DEFAULT_MAX_ENTRIES = 20_000
DEFAULT_MAX_RUNS = 50


@dataclass(frozen=True)
class RunCandidate:
    """One run the user may mean: a config, a log, or both. ``mtime_s`` is the newer of the two."""

    config: Path | None
    log: Path | None
    mtime_s: float

    @property
    def folder(self) -> Path:
        return (self.log or self.config or Path(".")).parent


@dataclass(frozen=True)
class ScanResult:
    runs: list[RunCandidate]
    root: Path
    entries_seen: int
    stopped_early: bool  # the entry or depth budget ran out: there may be more runs below
    cancelled: bool = False
    skipped: list[str] = field(default_factory=list)  # folders we could not read


def is_training_config(path: Path) -> bool:
    """True when the YAML names a model (``model_name_or_path:`` at the start of a line)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(CONFIG_SNIFF_BYTES)
    except OSError:
        return False
    text = head.decode("utf-8", errors="replace")

    def top_level(key: str) -> bool:  # a key of the document itself, not of a nested mapping or a list
        return re.search(rf"(?m)^{re.escape(key)}\s*:", text) is not None

    return all(top_level(key) for key in CONFIG_MARKER_KEYS) and any(top_level(k) for k in TRAINING_KEYS)


def _is_log_name(name: str) -> bool:
    return name in LOG_NAMES or name.endswith(LOG_SUFFIXES)


def _skip_dir(name: str) -> bool:
    return name in SKIP_DIR_NAMES or name.startswith(SKIP_DIR_PREFIXES)


def _log_rank(path: Path) -> int:
    try:
        return LOG_NAMES.index(path.name)
    except ValueError:
        return len(LOG_NAMES) - 1  # a *.log ranks with the console captures, above trainer_log.jsonl


def find_runs(
    root: str | os.PathLike[str] = ".",
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_runs: int = DEFAULT_MAX_RUNS,
    is_cancelled: Callable[[], bool] | None = None,
) -> ScanResult:
    """Walk ``root`` breadth-first (shallow folders first), pair configs with logs, newest run first."""
    root_path = Path(root)
    walk = _Walk(root_path, max_depth=max_depth, max_entries=max_entries)
    while walk.pending():
        if is_cancelled is not None and is_cancelled():
            return ScanResult(
                [], root_path, walk.entries, stopped_early=True, cancelled=True, skipped=walk.skipped
            )
        walk.scan_next()
        if walk.stopped and walk.entries > max_entries:
            break
    runs = pair_runs(walk.configs, walk.logs)
    runs.sort(key=lambda r: (-r.mtime_s, str(r.log or r.config)))
    return ScanResult(
        runs[:max_runs], root_path, walk.entries, stopped_early=walk.stopped, skipped=walk.skipped
    )


class _Walk:
    """A bounded breadth-first walk collecting training configs and logs.

    Where LLaMA-Factory and its users keep runs is scanned first (breadth-first within each class), so a big
    data folder beside them cannot use up the budget before they are seen.
    """

    def __init__(self, root: Path, *, max_depth: int, max_entries: int) -> None:
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.configs: list[tuple[Path, float]] = []
        self.logs: list[tuple[Path, float]] = []
        self.skipped: list[str] = []  # folders we could not read
        self.entries = 0
        self.stopped = False  # the entry or depth budget ran out
        self._preferred: deque[tuple[Path, int]] = deque([(root, 0)])
        self._others: deque[tuple[Path, int]] = deque()

    def pending(self) -> bool:
        return bool(self._preferred or self._others)

    def scan_next(self) -> None:
        """List the next folder (preferred ones first) and take its entries, within the entry budget."""
        from_preferred = bool(self._preferred)
        folder, depth = self._preferred.popleft() if from_preferred else self._others.popleft()
        try:
            with os.scandir(folder) as it:
                listing = sorted(it, key=lambda e: e.name)
        except OSError:
            self.skipped.append(str(folder))
            return
        for entry in listing:
            self.entries += 1
            if self.entries > self.max_entries:
                self.stopped = True
                return
            with contextlib.suppress(OSError):
                self._take(entry, depth, from_preferred)

    def _take(self, entry: os.DirEntry[str], depth: int, from_preferred: bool) -> None:
        """Queue a folder worth entering (one past the depth limit marks the walk stopped early); keep a
        training config or a log."""
        if entry.is_dir(follow_symlinks=False):
            if depth + 1 <= self.max_depth and not _skip_dir(entry.name):
                first = (from_preferred and depth > 0) or entry.name in PREFERRED_DIR_NAMES
                (self._preferred if first else self._others).append((Path(entry.path), depth + 1))
            elif depth + 1 > self.max_depth:
                self.stopped = True
            return
        if not entry.is_file():
            return
        if entry.name.endswith(CONFIG_SUFFIXES):
            path = Path(entry.path)
            if is_training_config(path):
                self.configs.append((path, entry.stat().st_mtime))
        elif _is_log_name(entry.name):
            self.logs.append((Path(entry.path), entry.stat().st_mtime))


def pair_runs(configs: list[tuple[Path, float]], logs: list[tuple[Path, float]]) -> list[RunCandidate]:
    """A config and a log are one run when they share a folder, else when they share a file stem
    (``configs/qwen_lora.yaml`` with ``qwen_lora.log``). Each file belongs to at most one run."""
    used_logs: set[Path] = set()
    runs, unpaired_configs = _pair_in_folders(configs, logs, used_logs)
    runs += _pair_by_stem(unpaired_configs, logs, used_logs)
    runs += [RunCandidate(None, log, mtime) for log, mtime in logs if log not in used_logs]
    return runs


def _by_folder(files: list[tuple[Path, float]]) -> dict[Path, list[tuple[Path, float]]]:
    grouped: dict[Path, list[tuple[Path, float]]] = {}
    for path, mtime in files:
        grouped.setdefault(path.parent, []).append((path, mtime))
    return grouped


def _pair_in_folders(
    configs: list[tuple[Path, float]], logs: list[tuple[Path, float]], used_logs: set[Path]
) -> tuple[list[RunCandidate], list[tuple[Path, float]]]:
    """Same folder: the best-ranked log; when a folder holds several configs, pair only one of them
    (training_args.yaml in a saves/ folder, else the newest). The runs, and the configs left unpaired."""
    runs: list[RunCandidate] = []
    unpaired_configs: list[tuple[Path, float]] = []
    logs_by_folder = _by_folder(logs)
    for folder, folder_configs in _by_folder(configs).items():
        folder_logs = sorted(logs_by_folder.get(folder, []), key=lambda lm: (_log_rank(lm[0]), -lm[1]))
        ordered = sorted(folder_configs, key=lambda cm: (cm[0].name != "training_args.yaml", -cm[1]))
        if not folder_logs:
            unpaired_configs.extend(ordered)
            continue
        cfg, cfg_mtime = ordered[0]
        log, log_mtime = folder_logs[0]
        runs.append(RunCandidate(cfg, log, max(cfg_mtime, log_mtime)))
        # LLaMA-Factory's own files in that folder belong to this run; other *.log files stay separate.
        used_logs.add(log)
        used_logs.update(lg for lg, _ in folder_logs if lg.name in RUN_FOLDER_LOG_NAMES)
        unpaired_configs.extend(ordered[1:])
    return runs, unpaired_configs


def _pair_by_stem(
    configs: list[tuple[Path, float]], logs: list[tuple[Path, float]], used_logs: set[Path]
) -> list[RunCandidate]:
    """Same stem, anywhere (the newest such log); a config with none is a run of its own."""
    logs_by_stem: dict[str, list[tuple[Path, float]]] = {}
    for log, mtime in logs:
        if log not in used_logs:
            logs_by_stem.setdefault(log.stem, []).append((log, mtime))
    runs: list[RunCandidate] = []
    for cfg, cfg_mtime in configs:
        candidates = [lm for lm in logs_by_stem.get(cfg.stem, []) if lm[0] not in used_logs]
        if candidates:
            log, log_mtime = max(candidates, key=lambda lm: lm[1])
            used_logs.add(log)
            runs.append(RunCandidate(cfg, log, max(cfg_mtime, log_mtime)))
        else:
            runs.append(RunCandidate(cfg, None, cfg_mtime))
    return runs


def display_path(path: str | os.PathLike[str] | None, cwd: str | os.PathLike[str] | None = None) -> str:
    """A path as the user should read it: relative to ``cwd`` when inside it, ``<demo>/...`` for the
    bundled configs, else ``~/...`` or absolute. Never a temporary absolute path when avoidable."""
    if path is None:
        return ""
    p = Path(path)
    base = Path(cwd) if cwd is not None else Path.cwd()
    try:
        resolved = p.resolve()
    except OSError:
        resolved = p.absolute()
    try:
        return str(resolved.relative_to(base.resolve()))
    except ValueError:
        pass
    from oomdoctor.resources import configs_dir

    try:
        return "<demo>/" + str(resolved.relative_to(configs_dir().resolve()))
    except ValueError:
        pass
    home = Path.home()
    try:
        return "~/" + str(resolved.relative_to(home.resolve()))
    except ValueError:
        return str(resolved)


TRIALS_DIR_NAME = "trials"
_TRIAL_NUMBER = re.compile(r"^(\d+)-")


def rule_short_name(rule_id: str) -> str:
    """``first_batch.halve_micro_batch`` -> ``halve_micro_batch``: the part a folder name needs."""
    short = rule_id.rsplit(".", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", short).strip("-_")
    return slug or "change"


def suggest_trial_folder(root: str | os.PathLike[str], rule_id: str) -> Path:
    """``<root>/trials/NN-<rule>``, numbered after the trials already there, never an existing folder.

    The root is where the user runs ``llamafactory-cli`` (relative ``dataset_dir`` paths resolve there),
    so trials go beside the run, not beside a config that may sit in a read-only package.
    """
    trials = Path(root) / TRIALS_DIR_NAME
    highest = 0
    if trials.is_dir():
        for entry in trials.iterdir():
            m = _TRIAL_NUMBER.match(entry.name)
            if m:
                highest = max(highest, int(m.group(1)))
    number = highest + 1
    while True:
        candidate = trials / f"{number:02d}-{rule_short_name(rule_id)}"
        if not candidate.exists():
            return candidate
        number += 1


TRIAL_RUN_SUFFIX = "-trial"
_TRIAL_RUN_NAME = re.compile(r"-trial(-\d+)?$")


def trial_run_folder(change_folder: str | os.PathLike[str]) -> Path:
    """Where a short trial of a written change records its run: beside it, ``<change folder>-trial``, then
    ``-trial-2``, ... when the change is tried again (a trial never reuses a folder). The folder's name is
    what the comparison table shows, so it carries the change's number and rule."""
    change = Path(change_folder)
    base = change.with_name(change.name + TRIAL_RUN_SUFFIX)
    if not base.exists():
        return base
    number = 2
    while (candidate := change.with_name(f"{change.name}{TRIAL_RUN_SUFFIX}-{number}")).exists():
        number += 1
    return candidate


TRIAL_RESULT_NAME = "result.json"


def trial_origin(config: str | os.PathLike[str]) -> tuple[Path, Path | None]:
    """``(config to diagnose and change, trial folder or None)`` for a config the user opened.

    A trial folder's config.yaml ran with the trial's limits (max_steps, eval/save steps, its own
    output_dir). A change made on top of it must start from the config it was made from, which the
    trial's result.json names (``source_config``); the trial folder stays the parent to compare with.
    """
    path = Path(config)
    result = path.parent / TRIAL_RESULT_NAME
    if not result.is_file():
        return path, None
    record = read_small_json(result)  # bounded: a hostile result.json cannot exhaust the reader
    source = record.get("source_config") if record is not None else None
    if isinstance(source, str) and Path(source).is_file():
        return Path(source), path.parent
    return path, path.parent


# --- The session's memory: the trials folder -----------------------------------------------------------------
# What the app writes beside the trial folders so that reopening ``oomdoctor`` in the same folder comes back
# to the same run: the run that failed (config and log) and the lengths measured for it.
SESSION_NAME = "session.json"
LENGTHS_NAME = "lengths.json"
CHANGE_NAME = "change.json"
JSON_MAX_BYTES = 4 * 1024**2  # change.json, result.json and session.json are a few KiB


@dataclass(frozen=True)
class SavedChange:
    """One change folder under ``trials/`` (``change.json``) and the short trials run of it, oldest first."""

    folder: Path
    config: Path
    record: dict[str, Any]
    trials: list[Path]

    @property
    def parent(self) -> str | None:
        parent = self.record.get("parent")
        return str(parent) if parent else None


@dataclass(frozen=True)
class SavedSession:
    """What an earlier session left in ``trials/``: the failed run, its measured lengths, its changes."""

    config: Path | None
    log: Path | None
    lengths_file: Path | None
    changes: list[SavedChange]


def read_small_json(path: Path) -> dict[str, Any] | None:
    """A small JSON object we wrote (bounded: a hostile file cannot exhaust the reader), or None."""
    from oomdoctor.errors import BadInput
    from oomdoctor.inputs import read_json_object

    if not path.is_file():
        return None
    try:
        return read_json_object(path, what=path.name, max_bytes=JSON_MAX_BYTES)
    except BadInput:
        return None


def _existing(value: object) -> Path | None:
    if isinstance(value, str) and value and Path(value).is_file():
        return Path(value)
    return None


def _trial_runs_of(change: Path) -> list[Path]:
    """``<change>-trial``, ``<change>-trial-2``, ... in the order they were run."""
    runs = [change.with_name(change.name + TRIAL_RUN_SUFFIX)]
    siblings = sorted(
        change.parent.glob(f"{change.name}{TRIAL_RUN_SUFFIX}-*"),
        key=lambda p: int(p.name.rsplit("-", 1)[-1]) if p.name.rsplit("-", 1)[-1].isdigit() else 0,
    )
    return [p for p in runs + siblings if p.is_dir()]


def saved_changes(root: str | os.PathLike[str]) -> list[SavedChange]:
    """The change folders under ``<root>/trials`` (numbered ``NN-rule``), in their number's order."""
    trials = Path(root) / TRIALS_DIR_NAME
    if not trials.is_dir():
        return []
    found: list[tuple[int, SavedChange]] = []
    for entry in trials.iterdir():
        m = _TRIAL_NUMBER.match(entry.name)
        record = read_small_json(entry / CHANGE_NAME) if m and entry.is_dir() else None
        if m is None or record is None or _TRIAL_RUN_NAME.search(entry.name):
            continue  # not a change folder (a trial run holds a copy of its change.json)
        found.append(
            (int(m.group(1)), SavedChange(entry, entry / "config.yaml", record, _trial_runs_of(entry)))
        )
    return [change for _, change in sorted(found, key=lambda nc: (nc[0], nc[1].folder.name))]


def read_saved_session(root: str | os.PathLike[str]) -> SavedSession | None:
    """The session an earlier ``oomdoctor`` left in ``<root>/trials``, or None when there is none (or the
    run it names is gone)."""
    trials = Path(root) / TRIALS_DIR_NAME
    record = read_small_json(trials / SESSION_NAME)
    if record is None:
        return None
    config, log = _existing(record.get("config")), _existing(record.get("log"))
    if config is None and log is None:
        return None
    lengths = trials / LENGTHS_NAME
    return SavedSession(config, log, lengths if lengths.is_file() else None, saved_changes(root))


def save_session(root: str | os.PathLike[str], config: Path | None, log: Path | None) -> Path:
    """Remember the run that failed in ``<root>/trials/session.json`` (the trials folder is ours)."""
    import json

    trials = Path(root) / TRIALS_DIR_NAME
    trials.mkdir(parents=True, exist_ok=True)
    path = trials / SESSION_NAME
    record = {
        "written_by": "oomdoctor",
        "config": str(Path(config).resolve()) if config is not None else None,
        "log": str(Path(log).resolve()) if log is not None else None,
    }
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def save_lengths(root: str | os.PathLike[str], lengths: dict[str, Any]) -> Path:
    """Keep measured lengths in ``<root>/trials/lengths.json`` (what ``oomdoctor lengths --json`` prints,
    readable with ``--lengths``), so a later session does not tokenize again."""
    import json

    trials = Path(root) / TRIALS_DIR_NAME
    trials.mkdir(parents=True, exist_ok=True)
    path = trials / LENGTHS_NAME
    path.write_text(json.dumps(lengths, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
