"""Run a short trial of a LLaMA-Factory config and record what happened, in a new folder.

A trial is the course's "try it, then compare": the given config, cut to ``steps`` update steps but still
passing through the first batch, the first optimizer update, one validation (when the config evaluates) and
one checkpoint save, launched exactly as the user would launch it, while a sampler records memory. The folder
holds ``config.yaml`` (what ran), ``change.json`` (when the config came from ``oomdoctor patch``),
``train.log``, ``gpu-samples.csv`` and ``result.json``; ``oomdoctor compare`` reads only those.

The launcher runs in its own session (process group). At the time limit, on ``stop``, or on Ctrl+C the
whole group gets SIGTERM, then SIGKILL after a grace period; descendants that left the group are tracked
and stopped too. A failed trial is never retried and its log is kept.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomdoctor import inputs
from oomdoctor.errors import BadInput
from oomdoctor.facts.gpu import GpuSource, NvmlSource, read_gpu
from oomdoctor.facts.types import ConfigFacts, GpuFacts, LogFacts
from oomdoctor.i18n import msg
from oomdoctor.report import units
from oomdoctor.trial.env import allowed_change_env, shown_env
from oomdoctor.trial.folder import CHANGE, TrialFolder
from oomdoctor.trial.procs import TrialProcesses
from oomdoctor.trial.sampler import ProcessTreeRss, Sampler, SampleSnapshot

DEFAULT_LAUNCHER = "llamafactory-cli train"
GRACE_S = 10.0  # SIGTERM -> SIGKILL
RESULT_SCHEMA = 1

# What the trial always sets in the child's environment (besides the launcher's own VAR=value words).
# RECORD_VRAM makes LLaMA-Factory log torch's peak allocated/reserved; unbuffered output keeps the log
# complete when the process is killed.
TRIAL_ENV = {"RECORD_VRAM": "1", "PYTHONUNBUFFERED": "1"}

_ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)


@dataclass(frozen=True)
class TrialProgress:
    """Training progress as LLaMA-Factory records it (``trainer_log.jsonl``), plus the memory peak so far."""

    steps_done: int
    total_steps: int | None
    elapsed_s: float
    peak_mib: float | None
    loss: float | None = None
    eval_loss: float | None = None


@dataclass
class TrialResult:
    """The outcome of one trial; ``record`` is exactly what ``result.json`` holds."""

    folder: Path
    record: dict[str, Any]
    other_gpu_processes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.record["ok"])

    @property
    def exit_code(self) -> int | None:
        code: int | None = self.record["exit_code"]
        return code

    @property
    def outcome(self) -> str:
        return str(self.record["outcome"])

    @property
    def peak_memory_mib(self) -> float | None:
        peak: float | None = self.record["peak_memory_mib"]
        return peak

    @property
    def result_path(self) -> Path:
        return TrialFolder(self.folder).result


# --- Launcher ------------------------------------------------------------------------------------------------


def parse_launcher(launcher: str) -> tuple[dict[str, str], list[str]]:
    """``"FORCE_TORCHRUN=1 llamafactory-cli train"`` -> ``({"FORCE_TORCHRUN": "1"}, ["llamafactory-cli", "train"])``.

    Leading ``VAR=value`` words become environment, as in a shell; the rest is the command.
    """
    try:
        words = shlex.split(launcher)
    except ValueError as err:
        raise BadInput(msg("launcher_bad", None, launcher=launcher, detail=err)) from None
    env: dict[str, str] = {}
    while words and _ENV_WORD.fullmatch(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if not words:
        raise BadInput(msg("launcher_empty", None, launcher=launcher))
    return env, words


def resolve_program(program: str, path_env: str | None) -> str | None:
    """The executable to run: on PATH, or beside this Python (a venv used without activating it)."""
    if os.sep in program:
        candidate = Path(program).expanduser()
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    found = shutil.which(program, path=path_env)
    if found:
        return found
    beside = Path(sys.executable).parent / program
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


# --- The config that runs ---------------------------------------------------------------------------------


def _yaml_rt() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments and key order survive
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def trial_overrides(config: ConfigFacts, *, steps: int, output_dir: Path) -> dict[str, Any]:
    """The keys a trial sets so that ``steps`` update steps pass every phase once.

    ``save_steps``/``eval_steps`` = ``steps`` make the last step validate (when the config evaluates with
    the ``steps`` strategy) and save a checkpoint; an ``epoch`` strategy already does both when training stops.
    """
    raw = config.raw
    changes: dict[str, Any] = {
        "max_steps": steps,
        "logging_steps": 1,  # one trainer_log.jsonl line per step: progress and the last good step
        "output_dir": str(output_dir),
    }
    save_strategy = str(raw.get("save_strategy", "steps")).lower()
    if save_strategy == "steps":
        changes["save_steps"] = steps
    if config.do_eval and config.eval_strategy == "steps":
        changes["eval_steps"] = steps
    if str(raw.get("report_to", "")).lower() not in ("", "none", "[]"):
        changes["report_to"] = "none"  # a trial is not an experiment worth tracking (and must not prompt)
    deepspeed = raw.get("deepspeed")
    if isinstance(deepspeed, str) and deepspeed and not Path(deepspeed).is_absolute():
        here = Path(deepspeed)
        beside_config = Path(config.path).parent / deepspeed
        if not here.exists() and beside_config.exists():
            changes["deepspeed"] = str(beside_config.resolve())  # the trial config lives elsewhere
    return changes


def trial_config_text(src: Path, changes: Mapping[str, Any]) -> tuple[str, dict[str, list[Any]]]:
    """The config with ``changes`` applied, keeping comments and key order, and ``{key: [old, new]}``.

    BadInput when the round-trip parser cannot read what the config reader accepted: a key written twice
    (PyYAML keeps the last, LLaMA-Factory refuses the file), an odd tag.
    """
    import io

    from ruamel.yaml.error import YAMLError

    yaml = _yaml_rt()  # refuses duplicate keys, as LLaMA-Factory's OmegaConf does
    try:
        with src.open(encoding="utf-8-sig") as f:
            data = yaml.load(f)
    except YAMLError as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        mark = getattr(err, "problem_mark", None)
        detail = f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem
        raise BadInput(msg("yaml_malformed", None, path=src, detail=" ".join(detail.split()))) from None
    applied: dict[str, list[Any]] = {}
    for key, value in changes.items():
        old = data.get(key)
        if old != value:
            applied[key] = [
                old if old is None or isinstance(old, str | int | float | bool) else str(old),
                value,
            ]
        data[key] = value
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue(), applied


# --- Facts for comparing trials ---------------------------------------------------------------------------------


def dataset_fingerprint(config: ConfigFacts, cwd: Path) -> str:
    """sha256 over the dataset files the config names (through ``dataset_dir/dataset_info.json``).

    "unknown" when a name cannot be resolved to local files (a hub dataset, a missing entry or file).
    """
    names = list(config.dataset) + [n for n in config.eval_dataset if n not in config.dataset]
    if not names:
        return "unknown"
    dataset_dir = Path(config.dataset_dir).expanduser()
    if not dataset_dir.is_absolute():
        dataset_dir = cwd / dataset_dir
    from oomdoctor.facts.dataset import dataset_files_inside

    try:  # bounded reads; a file_name leading outside dataset_dir is never followed
        info = inputs.read_json_object(dataset_dir / "dataset_info.json", what="dataset_info.json")
        targets = dataset_files_inside(dataset_dir, names)
    except BadInput:
        return "unknown"
    digest = hashlib.sha256()
    for name in names:
        entry = info.get(name)
        target = targets.get(name)
        if target is None or not isinstance(entry, dict):
            return "unknown"
        base = dataset_dir.resolve()
        if target.is_dir():
            files = sorted(p for p in target.rglob("*") if p.is_file() and p.resolve().is_relative_to(base))
        elif target.is_file():
            files = [target]
        else:
            return "unknown"
        digest.update(json.dumps([name, entry], sort_keys=True).encode())
        for path in files:
            digest.update(str(path.relative_to(base)).encode())
            with path.open("rb") as f:
                while block := f.read(1 << 20):
                    digest.update(block)
    return "sha256:" + digest.hexdigest()


def _other_processes(gpu: GpuFacts) -> list[dict[str, Any]]:
    return [
        {"gpu": dev.index, "pid": p.pid, "name": p.name, "used_mib": p.used_mib}
        for dev in gpu.devices
        for p in dev.processes
    ]


# --- Output streaming ---------------------------------------------------------------------------------------------


class _LogStreamer:
    """Copies the child's merged stdout/stderr into train.log line by line.

    A progress bar redraws itself with ``\\r``: each redraw becomes its own line, so the log keeps the step the
    bar had reached; ``\\r\\n`` is one line end. Bytes are decoded per whole line (UTF-8, replacing errors).
    """

    def __init__(self, stream: Any, log_path: Path, on_line: Callable[[str], None] | None) -> None:
        self._stream = stream
        self._log = log_path.open("w", encoding="utf-8")
        self._on_line = on_line
        self.lines = 0
        self.on_line_errors = 0
        self._thread = threading.Thread(target=self._run, name="oomdoctor-trial-log", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self._log.close()

    def _emit(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace")
        self._log.write(line + "\n")
        self._log.flush()
        self.lines += 1
        if self._on_line is not None:
            try:
                self._on_line(line)
            except Exception:  # a display problem must not stop the recording
                self.on_line_errors += 1

    def _run(self) -> None:
        buf = b""
        fd = self._stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            buf = self._emit_lines(buf + chunk, more=bool(chunk))
            if not chunk:
                break
        if buf.strip(b"\r"):
            self._emit(buf.rstrip(b"\r"))
        self._log.flush()

    def _emit_lines(self, buf: bytes, *, more: bool) -> bytes:
        """Emit every whole line of ``buf`` (a ``\\r`` redraw is a line too); return what is left of it.
        ``more``: more output may follow, so a ``\\r`` at the very end may be the first half of ``\\r\\n``."""
        while True:
            cut = min((i for i in (buf.find(b"\n"), buf.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                return buf
            if buf[cut : cut + 1] == b"\n":
                self._emit(buf[:cut])
                buf = buf[cut + 1 :]
            elif buf[cut + 1 : cut + 2] == b"\n":
                self._emit(buf[:cut])
                buf = buf[cut + 2 :]
            elif cut + 1 == len(buf) and more:
                return buf  # maybe "\r\n" split across reads: wait for the next byte
            else:
                if cut:
                    self._emit(buf[:cut])  # a progress redraw
                buf = buf[cut + 1 :]


_POLL_BYTES = 16 << 20  # what one poll of trainer_log.jsonl reads at most


def _small_number(value: Any) -> bool:
    """A number ``float()`` takes without overflow and a log value can sensibly be (a loss, GiB)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e12


class _ProgressWatcher:
    """Follows ``trainer_log.jsonl`` as LLaMA-Factory appends to it (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.steps_done = 0
        self.total_steps: int | None = None
        self.loss: float | None = None
        self.eval_loss: float | None = None
        self.vram_allocated_gib: float | None = None
        self.vram_reserved_gib: float | None = None

    def poll(self) -> bool:
        """Read what was appended; True when the completed step count moved."""
        try:
            with inputs.open_regular(self.path, what="trainer_log.jsonl", max_bytes=1 << 40) as f:
                f.seek(self._offset)
                data = f.read(_POLL_BYTES)  # bounded per poll; the rest is read on the next ones
        except (OSError, BadInput):
            return False
        self._offset += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        if len(self._partial) > _POLL_BYTES:
            self._partial = b""  # a "line" that never ends is no log entry
        before = self.steps_done
        for line in lines:
            try:
                entry = inputs.load_json(line.decode("utf-8", "replace"), path=str(self.path))
            except BadInput:
                continue
            if isinstance(entry, dict):
                self._take(entry)
        return self.steps_done != before

    def _take(self, entry: dict[str, Any]) -> None:
        if isinstance(entry.get("total_steps"), int):
            self.total_steps = entry["total_steps"]
        if isinstance(entry.get("current_steps"), int) and ("loss" in entry or "eval_loss" in entry):
            self.steps_done = max(self.steps_done, entry["current_steps"])
        if _small_number(entry.get("loss")):
            self.loss = float(entry["loss"])
        if _small_number(entry.get("eval_loss")):
            self.eval_loss = float(entry["eval_loss"])
        for key in ("vram_allocated", "vram_reserved"):
            value = entry.get(key)
            if _small_number(value):
                attr = f"{key}_gib"
                current = getattr(self, attr)
                value = float(value or 0.0) + 0.0  # -0.0 (seen on CPU) reads as 0.0
                setattr(self, attr, value if current is None else max(current, value))


# --- Stopping the whole tree ---------------------------------------------------------------------------------


def _group_members(pgid: int) -> list[Any]:
    import psutil

    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (OSError, psutil.Error):
            continue
    return members


def _signal_all(pgid: int, tree: ProcessTreeRss, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for proc in tree.alive():  # descendants that started their own session
        with contextlib.suppress(Exception):
            proc.send_signal(sig)


def _stop_everything(proc: subprocess.Popen[bytes], tree: ProcessTreeRss, grace_s: float) -> int:
    """SIGTERM to the group and every known descendant, SIGKILL after ``grace_s``. Returns how many
    processes were still running when we started stopping."""
    survivors = {p.pid for p in _group_members(proc.pid)} | {p.pid for p in tree.alive()}
    if proc.poll() is None:
        survivors.add(proc.pid)
    if not survivors:
        return 0
    _signal_all(proc.pid, tree, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()
        if proc.returncode is not None and not _group_members(proc.pid) and not tree.alive():
            break
        time.sleep(0.1)
    else:
        _signal_all(proc.pid, tree, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    deadline = time.monotonic() + 5
    while (_group_members(proc.pid) or tree.alive()) and time.monotonic() < deadline:
        _signal_all(proc.pid, tree, signal.SIGKILL)
        time.sleep(0.05)
    return len(survivors)


# --- Reading the results ---------------------------------------------------------------------------------------


def _launch(
    processes: TrialProcesses, argv: list[str], *, env: dict[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """Start the launcher in its own session, inside the trial's cgroup when there is one."""
    try:
        return subprocess.Popen(processes.wrap(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)  # fmt: skip
    except BaseException:
        processes.stop_all(0)  # nothing started: removes the cgroup
        raise


def _read_change(path: Path) -> dict[str, Any]:
    """The config's ``change.json`` (from ``oomdoctor patch``), read through the input layer: {} when there
    is none, BadInput (nothing run) when it is not a small JSON object."""
    if not path.exists() and not path.is_symlink():
        return {}
    return inputs.read_json_object(path, what="change.json")


def _run_folders(config: ConfigFacts, run_dir: Path) -> dict[str, Path]:
    from oomdoctor.patch.writer import run_folders

    return run_folders(dict(config.raw), run_dir)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _diagnosed_cause(
    config_path: Path, log_path: Path, source: GpuSource | None
) -> tuple[str | None, str | None]:
    """What filled the memory, as the rules see it; (cause, error) so a rules failure never loses a result."""
    try:
        from oomdoctor.api import run_diagnosis

        diagnosis = run_diagnosis(config_path, log_path, gpu_source=source)
    except Exception as err:
        return None, f"{type(err).__name__}: {err}"
    return diagnosis.cause, None


def _run_dir_for(config: ConfigFacts) -> Path:
    """Where ``llamafactory-cli`` must start so the config's relative paths resolve (as ``oomdoctor patch``
    decided it, or where those paths exist); the current folder when nothing depends on it."""
    try:
        from oomdoctor.patch.writer import find_run_dir

        found, _ = find_run_dir(config.raw, Path(config.path).parent)
    except ImportError:
        found = None
    return found if found is not None else Path.cwd()


def _plan_probe(config: ConfigFacts, files: TrialFolder, *, steps: int, cwd: Path, lengths: Any) -> Any:
    from oomdoctor.trial.probe import ProbeRun, plan_probe

    plan = plan_probe(config, files.probe_data, steps=steps, cwd=cwd, lengths=lengths)
    saves = str(config.raw.get("save_strategy", "steps")).lower() != "no"
    return ProbeRun(plan, evaluates=config.do_eval, saves=saves)


def _calibrate(files: TrialFolder) -> dict[str, Any]:
    """Fit the memory model's stack constants to the probe (calibration.json + the user cache); a failure to
    calibrate never loses the trial's result."""
    try:
        from oomdoctor.estimate.calibrate import calibrate_trial

        calibration = calibrate_trial(files.path)
    except Exception as err:  # the model cannot be read, nothing measured: the trial still stands
        return {"calibration_error": f"{type(err).__name__}: {err}"}
    return {"calibration": {**calibration.describe(), "file": str(files.calibration)}}


def _outcome(*, exit_code: int | None, timed_out: bool, stopped: bool, oom: bool) -> str:
    if timed_out:
        return "timed_out"
    if stopped:
        return "stopped"
    if oom:
        return "oom"
    return "ok" if exit_code == 0 else "failed"


# --- The trial ----------------------------------------------------------------------------------------------


def run_trial(
    config_path: str | os.PathLike[str],
    *,
    steps: int,
    out_dir: str | os.PathLike[str],
    timeout_s: float = 600,
    launcher: str = DEFAULT_LAUNCHER,
    source: GpuSource | None = None,
    interval_s: float = 0.2,
    on_sample: Callable[[SampleSnapshot], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    on_progress: Callable[[TrialProgress], None] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    grace_s: float = GRACE_S,
    probe: bool = False,
    probe_lengths: Any = None,
) -> TrialResult:
    """Run ``launcher <out_dir>/config.yaml`` for ``steps`` steps and write the trial folder.

    BadInput (nothing written) when the config cannot be read, ``out_dir`` exists, ``steps``/``timeout_s``
    are not positive or the launcher's program cannot be found. Otherwise the trial always ends with a
    ``result.json``, whatever the training did. The launcher runs in ``cwd`` (default: the current folder),
    where relative paths in the config (``dataset_dir``, the model) are resolved, as when the user runs it.

    ``probe=True`` makes it a probe trial (``trial/probe.py``): a derived dataset in the folder puts the
    longest samples first and ``result.json`` gets ``milestones``. ``probe_lengths`` replaces the token counter
    (LLaMA-Factory's template) in tests.
    """
    _check_run_numbers(steps=steps, timeout_s=timeout_s, interval_s=interval_s)
    plan = _plan_trial(config_path, steps=steps, out_dir=out_dir, launcher=launcher, cwd=cwd,
                       probe=probe, probe_lengths=probe_lengths)  # fmt: skip
    _write_trial_folder(plan)  # nothing is written before every check has passed
    if plan.probe_run is not None:
        on_line = plan.probe_run.line_hook(on_line)
    source = NvmlSource() if source is None else source
    gpu = read_gpu(source)
    others = _other_processes(gpu)
    if on_line is not None:
        _announce(on_line, plan.change_env, others)
    running = _start(plan, _Watchers(source, interval_s, on_sample, on_line, on_progress))
    ending = _watch(running, timeout_s=timeout_s, stop=stop, grace_s=grace_s)
    running.report_progress()
    record = _result_record(plan, running, ending, gpu=gpu, others=others, timeout_s=timeout_s)
    _write_result(plan.files, record, plan.probe_run, wall_s=ending.wall_s)
    if ending.interrupted:
        raise KeyboardInterrupt
    return TrialResult(folder=plan.folder, record=record, other_gpu_processes=others)


@dataclass(frozen=True)
class _Watchers:
    """Who watches the trial as it runs: the GPU source and its sampling interval, and the callers' hooks."""

    source: GpuSource
    interval_s: float
    on_sample: Callable[[SampleSnapshot], None] | None
    on_line: Callable[[str], None] | None
    on_progress: Callable[[TrialProgress], None] | None


@dataclass
class _Running:
    """A launched trial: the command, the copy of its output, the sampler and the progress followed."""

    plan: _TrialPlan
    watchers: _Watchers
    processes: TrialProcesses
    proc: subprocess.Popen[bytes]
    streamer: _LogStreamer
    sampler: Sampler
    tree: ProcessTreeRss
    progress: _ProgressWatcher
    started: float  # time.monotonic()
    started_at: str  # ISO time, UTC

    def report_progress(self) -> None:
        """Read what trainer_log.jsonl gained; tell the probe, and the caller when a step completed."""
        progress, probe_run, on_progress = self.progress, self.plan.probe_run, self.watchers.on_progress
        moved = progress.poll()
        if probe_run is not None:
            probe_run.poll(steps_done=progress.steps_done, eval_loss=progress.eval_loss,
                           checkpoints=self.plan.files.checkpoints())  # fmt: skip
        if moved and on_progress is not None:
            on_progress(
                TrialProgress(
                    progress.steps_done,
                    progress.total_steps,
                    time.monotonic() - self.started,
                    self.sampler.peak_mib,
                    progress.loss,
                    progress.eval_loss,
                )  # fmt: skip
            )

    def stop_all(self, grace_s: float) -> int:
        """Stop the process group, the tree, and what left both (the marker, the cgroup); how many ran."""
        survivors = _stop_everything(self.proc, self.tree, grace_s)
        return survivors + self.processes.stop_all(grace_s)

    def finish_recording(self) -> None:
        """Stop sampling and let the log copy take the output's last lines."""
        self.sampler.stop()
        self.streamer.join(timeout_s=10)


@dataclass(frozen=True)
class _Ending:
    """How the trial ended: its wall time, and whether the time limit, ``stop`` or Ctrl+C ended it."""

    wall_s: float
    timed_out: bool
    stopped: bool
    interrupted: bool
    survivors: int  # processes still running when the stopping began


def _start(plan: _TrialPlan, watchers: _Watchers) -> _Running:
    """Launch the command in its own session, copy its output into train.log, start sampling the memory."""
    files, probe_run = plan.files, plan.probe_run
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    started = time.monotonic()
    processes = TrialProcesses()  # the marker and cgroup that find what leaves the process group
    env = {**plan.env, **processes.env}
    proc = _launch(processes, plan.argv, env=env, cwd=plan.run_dir)
    streamer = _LogStreamer(proc.stdout, files.log, watchers.on_line)
    streamer.start()
    sampler = Sampler(watchers.source, pid=proc.pid, interval_s=watchers.interval_s, csv_path=files.samples,
                      on_sample=watchers.on_sample)  # fmt: skip
    tree = sampler.tree if sampler.tree is not None else ProcessTreeRss(proc.pid)
    sampler.start()
    progress = _ProgressWatcher(files.trainer_log)
    if probe_run is not None:
        probe_run.start(started, lambda: [p.pid for p in tree.alive()])
    return _Running(plan=plan, watchers=watchers, processes=processes, proc=proc, streamer=streamer,
                    sampler=sampler, tree=tree, progress=progress, started=started,
                    started_at=started_at)  # fmt: skip


def _watch(running: _Running, *, timeout_s: float, stop: threading.Event | None, grace_s: float) -> _Ending:
    """Follow the trial until it ends, the time limit, ``stop`` or Ctrl+C; then stop everything it started."""
    timed_out = stopped = interrupted = False
    ended: float | None = None
    try:
        ended, why = _watch_until_end(running.proc, sampler=running.sampler, tree=running.tree,
                                      tick=running.report_progress, started=running.started,
                                      timeout_s=timeout_s, stop=stop)  # fmt: skip
        timed_out, stopped = why == "timeout", why == "stop"
    except KeyboardInterrupt:
        stopped = interrupted = True
    finally:
        survivors = running.stop_all(grace_s)
        wall_s = (ended if ended is not None else time.monotonic()) - running.started
        running.finish_recording()
    return _Ending(wall_s=wall_s, timed_out=timed_out, stopped=stopped, interrupted=interrupted,
                   survivors=survivors)  # fmt: skip


@dataclass
class _TrialPlan:
    """What a trial will write and run, worked out and checked before anything is written."""

    config_file: Path
    config: ConfigFacts
    steps: int
    change: dict[str, Any]
    change_env: dict[str, str]
    env_overrides: dict[str, str]
    env: dict[str, str]
    run_dir: Path
    folder: Path
    files: TrialFolder
    argv: list[str]
    text: str
    overrides: dict[str, list[Any]]
    probe_run: Any


def _plan_trial(
    config_path: str | os.PathLike[str],
    *,
    steps: int,
    out_dir: str | os.PathLike[str],
    launcher: str,
    cwd: str | os.PathLike[str] | None,
    probe: bool,
    probe_lengths: Any,
) -> _TrialPlan:
    """Read the config and its change.json, check the new folder and the launcher (BadInput, nothing written)."""
    from oomdoctor.facts.config import read_config

    config_file = Path(config_path).expanduser()
    config = read_config(config_file)
    inputs.check_new_folder(out_dir)
    change_file = config_file.resolve().parent / CHANGE
    change = _read_change(change_file)
    run_dir = Path(cwd).expanduser().resolve() if cwd is not None else _run_dir_for(config)
    folder = inputs.check_new_folder(out_dir, protected=_run_folders(config, run_dir))
    launcher_env, command = parse_launcher(launcher)
    # the patch's environment (e.g. PYTORCH_CUDA_ALLOC_CONF) is part of the change being tried: memory
    # settings only (trial/env.py), never PATH or LD_PRELOAD from a folder someone else prepared
    change_env = allowed_change_env(change.get("env"), path=change_file)
    env_overrides = {**change_env, **launcher_env, **TRIAL_ENV}
    env = {**os.environ, **env_overrides}
    program = resolve_program(command[0], env.get("PATH"))
    if program is None:
        raise BadInput(msg("launcher_not_found", None, program=command[0]))

    files = TrialFolder(folder)
    keys = trial_overrides(config, steps=steps, output_dir=files.output_dir)
    probe_run = _plan_probe(config, files, steps=steps, cwd=run_dir, lengths=probe_lengths) if probe else None
    if probe_run is not None:
        keys.update(probe_run.plan.changes)
    text, overrides = trial_config_text(config_file, keys)
    argv = [program, *command[1:], str(files.config)]
    return _TrialPlan(config_file=config_file, config=config, steps=steps, change=change,
                      change_env=change_env, env_overrides=env_overrides, env=env, run_dir=run_dir,
                      folder=folder, files=files, argv=argv, text=text, overrides=overrides,
                      probe_run=probe_run)  # fmt: skip


def _write_trial_folder(plan: _TrialPlan) -> None:
    """Make the new folder and write the probe's dataset, the trial config and the change tried."""
    files = plan.files
    inputs.make_new_folder(plan.folder)
    if plan.probe_run is not None:
        plan.probe_run.plan.write()
    files.config.write_text(plan.text, encoding="utf-8")
    if plan.change:  # the bytes already read and checked, not the path again (it may have changed since)
        files.change.write_text(
            json.dumps(plan.change, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


def _check_run_numbers(*, steps: Any, timeout_s: Any, interval_s: Any) -> None:
    """BadInput unless the step count, the time limit and the sampling interval are usable numbers."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise BadInput(msg("trial_bad_steps", None, value=steps))
    if not isinstance(timeout_s, int | float) or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise BadInput(msg("trial_bad_timeout", None, value=timeout_s))  # nan would never time out
    if not isinstance(interval_s, int | float) or not math.isfinite(interval_s) or interval_s < 0.01:
        # 0 or nan: a busy loop
        raise BadInput(msg("arg_range", None, low="0.01", high="3600", value=interval_s))


def _announce(
    on_line: Callable[[str], None], change_env: dict[str, str], others: list[dict[str, Any]]
) -> None:
    """Tell the user, before anything runs, what the folder's change.json sets and who else holds a GPU."""
    if change_env:
        on_line("[oomdoctor] " + msg("env_applied", None, pairs=shown_env(change_env)))
    if others:
        listing = ", ".join(
            f"GPU {p['gpu']} pid {p['pid']} ({units.mib(p['used_mib'] or 0)})" for p in others
        )
        on_line("[oomdoctor] " + msg("trial_other_processes", None, listing=listing))


def _watch_until_end(
    proc: subprocess.Popen[bytes],
    *,
    sampler: Sampler,
    tree: ProcessTreeRss,
    tick: Callable[[], None],
    started: float,
    timeout_s: float,
    stop: threading.Event | None,
) -> tuple[float | None, str]:
    """Wait for the command, ticking the progress; returns (its end time or None, "exit"/"timeout"/"stop")."""
    while True:
        try:
            proc.wait(timeout=0.2)
            return time.monotonic(), "exit"  # the command's own end, before any clean-up of leftovers
        except subprocess.TimeoutExpired:
            pass
        if sampler.tree is None:
            tree.alive()  # keep learning the tree while NVML does the sampling
        tick()
        if time.monotonic() - started > timeout_s:
            return None, "timeout"
        if stop is not None and stop.is_set():
            return None, "stop"


def _write_result(files: TrialFolder, record: dict[str, Any], probe_run: Any, *, wall_s: float) -> None:
    """Write result.json (with a probe's milestones), then again with the calibration a probe earns."""
    if probe_run is not None:
        failed = record["phase"] if not record["ok"] else None
        record.update(probe_run.record(samples_csv=files.samples, trainer_log=files.trainer_log,
                                       failed_phase=failed, end_s=wall_s))  # fmt: skip
    files.result.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if probe_run is not None and probe_run.calibrates(record):
        record.update(_calibrate(files))
        files.result.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _result_record(
    plan: _TrialPlan,
    running: _Running,
    ending: _Ending,
    *,
    gpu: GpuFacts,
    others: list[dict[str, Any]],
    timeout_s: float,
) -> dict[str, Any]:
    """What ``result.json`` holds, part by part (its key order is the folder's contract): how the trial
    ended, the memory, the OOM, the progress, who else held a GPU, what makes two trials comparable, what ran.
    """
    log, log_error = _trial_log(plan.files)
    exit_code = running.proc.returncode
    signal_name = _signal_name(exit_code)
    verdict = _oom_verdict(log, signal_name, ending, plan.files, running.watchers.source)
    outcome = _outcome(
        exit_code=exit_code, timed_out=ending.timed_out, stopped=ending.stopped, oom=verdict.oom
    )
    record: dict[str, Any] = {
        **_ending_part(outcome, exit_code, signal_name, ending, timeout_s),
        **_memory_part(running.sampler),
        **_oom_part(verdict, log),
        **_progress_part(plan, running.progress, log),
        "other_gpu_processes": others,
        # comparability: two trials compare only when these agree
        **_comparability_part(plan, gpu),
        **_command_part(plan, running.started_at),
    }
    if log_error:
        record["log_error"] = log_error
    if verdict.diagnosis_error:
        record["diagnosis_error"] = verdict.diagnosis_error
    return record


def _trial_log(files: TrialFolder) -> tuple[LogFacts, str | None]:
    """The trial's train.log as the log reader sees it, and the reader's error: an empty log (killed at
    once) is still a result; so is a reader failure."""
    try:
        from oomdoctor.facts.log import read_log

        return read_log(files.log), None
    except Exception as err:
        return LogFacts(path=str(files.log)), f"{type(err).__name__}: {err}"


def _signal_name(exit_code: int | None) -> str | None:
    """The signal that ended the command (``SIGKILL``), from a negative exit code."""
    if exit_code is None or exit_code >= 0:
        return None
    with contextlib.suppress(ValueError):
        return signal.Signals(-exit_code).name
    return None


@dataclass(frozen=True)
class _OomVerdict:
    """Whether the trial ran out of memory, in which phase, and what filled it (as the rules see it)."""

    oom: bool
    oom_kind: str | None
    phase: str | None
    cause: str | None = None
    diagnosis_error: str | None = None


def _oom_verdict(
    log: LogFacts, signal_name: str | None, ending: _Ending, files: TrialFolder, source: GpuSource
) -> _OomVerdict:
    """The log's OOM, or a SIGKILL we did not send (on a training box, the kernel's OOM killer); an OOM is
    diagnosed on the trial's own config and log."""
    oom, oom_kind, phase = log.oom, log.oom_kind, log.phase
    if not oom and signal_name == "SIGKILL" and not (ending.timed_out or ending.stopped):
        oom, oom_kind = True, "killed"
        phase = log.phase if log.phase not in ("none", None) else "unknown"
    if not oom:
        return _OomVerdict(oom=oom, oom_kind=oom_kind, phase=phase)
    cause, diagnosis_error = _diagnosed_cause(files.config, files.log, source)
    return _OomVerdict(oom=oom, oom_kind=oom_kind, phase=phase, cause=cause, diagnosis_error=diagnosis_error)


def _ending_part(
    outcome: str, exit_code: int | None, signal_name: str | None, ending: _Ending, timeout_s: float
) -> dict[str, Any]:
    """How the trial ended: its outcome, exit code or signal, wall time, and who ended it."""
    return {
        "schema": RESULT_SCHEMA,
        "outcome": outcome,
        "ok": outcome == "ok",
        "exit_code": exit_code,
        "signal": signal_name,
        "wall_s": round(ending.wall_s, 2),
        "timed_out": ending.timed_out,
        "timeout_s": timeout_s,
        "stopped": ending.stopped,
        "survivors_stopped": ending.survivors,
    }


def _memory_part(sampler: Sampler) -> dict[str, Any]:
    """The memory peaks the sampler saw, overall and per GPU, and how it measured them."""
    peaks = sampler.peaks_mib
    return {
        "peak_memory_mib": round(max(peaks.values()), 1) if peaks else None,
        "peak_memory_mib_per_gpu": {gpu_id: round(v, 1) for gpu_id, v in sorted(peaks.items())},
        "peak_source": sampler.source_kind,
        "samples": sampler.samples_taken,
        "sample_interval_s": sampler.interval_s,
    }


def _oom_part(verdict: _OomVerdict, log: LogFacts) -> dict[str, Any]:
    """The OOM: its kind, phase and cause, and the error line, step and request the log gives."""
    return {
        "oom": verdict.oom,
        "oom_kind": verdict.oom_kind,
        "phase": verdict.phase,
        "cause": verdict.cause,
        "error_line": log.error_line,
        "oom_step": log.step,
        "requested_mib": log.requested_mib,
    }


def _progress_part(plan: _TrialPlan, progress: _ProgressWatcher, log: LogFacts) -> dict[str, Any]:
    """How far training got: trainer_log.jsonl first, then the output's result files, then train.log."""
    output_dir = plan.files.output_dir
    train_results = _read_json(output_dir / "train_results.json")
    eval_results = _read_json(output_dir / "eval_results.json")
    eval_loss = progress.eval_loss
    if eval_loss is None:
        eval_loss = eval_results.get("eval_loss", log.eval_loss)
    return {
        "steps_requested": plan.steps,
        "steps_done": progress.steps_done or log.good_steps or 0,
        "total_steps": progress.total_steps or log.total_steps,
        "train_runtime_s": train_results.get("train_runtime", log.train_runtime_s),
        "eval_loss": eval_loss,
        "last_loss": progress.loss if progress.loss is not None else log.last_loss,
        "checkpoints": plan.files.checkpoints(),
        "warnings": list(log.warnings),
        "alloc_retries": log.alloc_retries,
        "vram_allocated_gib": _first_known(progress.vram_allocated_gib, log.vram_allocated_gib),
        "vram_reserved_gib": _first_known(progress.vram_reserved_gib, log.vram_reserved_gib),
    }


def _first_known(value: float | None, fallback: float | None) -> float | None:
    return value if value is not None else fallback


def _comparability_part(plan: _TrialPlan, gpu: GpuFacts) -> dict[str, Any]:
    """What two trials must share to be compared: the model, the precision, the card, the data."""
    config = plan.config
    return {
        "model_name_or_path": config.model_name_or_path,
        "precision": config.precision,
        "gpu_name": ", ".join(d.name for d in gpu.devices) if gpu.available else None,
        "gpu_total_mib": gpu.first.total_mib if gpu.first is not None else None,
        "gpu_reason": gpu.reason,
        "dataset_fingerprint": dataset_fingerprint(config, plan.run_dir),
    }


def _command_part(plan: _TrialPlan, started_at: str) -> dict[str, Any]:
    """What ran, where, with which environment and config changes, and when."""
    return {
        "command": shlex.join(plan.argv),
        "argv": plan.argv,
        "env_overrides": plan.env_overrides,
        "cwd": str(plan.run_dir),
        "source_config": str(plan.config_file.resolve()),
        "trial_overrides": plan.overrides,
        "started_at": started_at,
    }
