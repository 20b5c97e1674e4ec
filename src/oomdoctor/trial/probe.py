"""Probe trials: the whole run's worst moments in a few steps.

A plain trial runs the config's first steps on the data in its usual order; a config whose longest samples
come late passes it and still runs out later. A probe trains on a derived copy of the dataset, written in the
trial folder (``probe-data/``, same columns and formatting, its own ``dataset_info.json``; the user's files
are only read) whose rows are sorted by their real token count through LLaMA-Factory's own template, longest
first, with shuffling off: the first micro-batch is the largest padded batch the run will ever build, and the
validation set is the longest validation samples at the config's eval batch size. It then records, in order,
the milestones the whole run must pass: ``load``, the ``longest_batch`` forward/backward, the first
``optimizer_step``, one ``eval`` on the longest eval batch and one checkpoint ``save``.

``plan_probe`` measures and decides (nothing written), ``ProbePlan.write`` writes the derived dataset,
``MilestoneClock`` notes when each milestone was seen during the run, and ``milestones`` turns those
moments and the trial's samples into the ``milestones`` list of ``result.json``.
"""

from __future__ import annotations

import contextlib
import csv
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomdoctor.errors import BadInput
from oomdoctor.facts.types import ConfigFacts
from oomdoctor.i18n import both, msg
from oomdoctor.text import Text

MILESTONES: tuple[str, ...] = ("load", "longest_batch", "optimizer_step", "eval", "save")
TRAIN_NAME = "oomdoctor_probe_train"
EVAL_NAME = "oomdoctor_probe_eval"
DEFAULT_PROBE_STEPS = 1  # step 1 holds the longest micro-batch and the first update; eval and save follow
_REMOTE_KEYS = ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name")
_LOAD_MARK = "***** Running training *****"
_SAVE_MARK = "Saving model checkpoint to"
PAD_MULTIPLE = 8  # LLaMA-Factory pads each batch to its longest sample rounded up to 8

RowLengths = Callable[[ConfigFacts, Sequence[str]], dict[str, list[int]]]


@dataclass(frozen=True)
class ProbeRows:
    """Rows of one source dataset that go into the derived copy, longest first."""

    source: str  # the dataset name in the user's dataset_info.json
    name: str  # the derived dataset's name
    rows: tuple[int, ...]  # row indexes in the source file, in the probe's order
    lengths: tuple[int, ...]  # their full token counts

    @property
    def longest(self) -> int:
        return max(self.lengths, default=0)


@dataclass
class ProbePlan:
    """How the probe builds its worst batches, and the config keys that make the trial use them."""

    data_dir: Path
    dataset_dir: Path  # the user's dataset_dir, resolved
    info: dict[str, Any]  # the user's dataset_info.json
    train: list[ProbeRows]
    eval: ProbeRows | None
    changes: dict[str, Any]
    micro_batch: int
    eval_batch: int
    cutoff_len: int
    how: list[Text] = field(default_factory=list)

    @property
    def longest_tokens(self) -> int:
        return max((part.longest for part in self.train), default=0)

    @property
    def eval_longest_tokens(self) -> int | None:
        return self.eval.longest if self.eval is not None else None

    def padded(self, tokens: int) -> int:
        return -(-min(tokens, self.cutoff_len) // PAD_MULTIPLE) * PAD_MULTIPLE

    def to_json(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir),
            "train": [_rows_json(part) for part in self.train],
            "eval": _rows_json(self.eval) if self.eval is not None else None,
            "longest_tokens": self.longest_tokens,
            "eval_longest_tokens": self.eval_longest_tokens,
            "micro_batch": self.micro_batch,
            "eval_batch": self.eval_batch,
            "config_changes": self.changes,
            "how": self.how,
        }

    def write(self) -> None:
        """Write the derived dataset and its ``dataset_info.json`` into ``data_dir`` (which must not exist)."""
        self.data_dir.mkdir(parents=True)
        info: dict[str, Any] = {}
        for part in [*self.train, *([self.eval] if self.eval is not None else [])]:
            entry = {k: v for k, v in self.info[part.source].items() if k != "num_samples"}
            file_name = f"{part.name}.jsonl"
            _write_rows(self.dataset_dir, self.info[part.source], part.rows, self.data_dir / file_name)
            info[part.name] = {**entry, "file_name": file_name}
        (self.data_dir / "dataset_info.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n",
                                                         encoding="utf-8")  # fmt: skip


def _rows_json(part: ProbeRows) -> dict[str, Any]:
    return {
        "source": part.source,
        "name": part.name,
        "rows": len(part.rows),
        "longest_tokens": part.longest,
        "first_rows": list(part.rows[:8]),
        "first_lengths": list(part.lengths[:8]),
    }


# --- Planning ------------------------------------------------------------------------------------------------


def _read_info(dataset_dir: Path) -> dict[str, Any]:
    path = dataset_dir / "dataset_info.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInput(msg("probe_no_info", None, path=path, detail=str(err).splitlines()[0])) from None
    if not isinstance(info, dict):
        raise BadInput(msg("probe_no_info", None, path=path, detail="not an object"))
    return info


def _check_local(info: dict[str, Any], names: Sequence[str]) -> None:
    for name in names:
        entry = info.get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("file_name"), str):
            remote = isinstance(entry, dict) and any(entry.get(k) for k in _REMOTE_KEYS)
            raise BadInput(msg("probe_remote_data" if remote else "probe_unknown_dataset", None, name=name))


def _longest_first(source: str, name: str, lengths: list[int], count: int) -> ProbeRows:
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))[: max(1, count)]
    return ProbeRows(source=source, name=name, rows=tuple(order), lengths=tuple(lengths[i] for i in order))


def _train_rows(names: Sequence[str], lengths: Mapping[str, list[int]], needed: int) -> list[ProbeRows]:
    """The ``needed`` longest rows over all training datasets, each dataset's rows longest first, the
    dataset holding the longest row first (the derived datasets are concatenated in that order)."""
    ranked = sorted(
        ((-n, names.index(src), src, i) for src in names for i, n in enumerate(lengths.get(src, [])))
    )
    chosen: dict[str, int] = {}
    for _neg, _pos, src, _i in ranked[: max(1, needed)]:
        chosen[src] = chosen.get(src, 0) + 1
    parts = [
        _longest_first(src, f"{TRAIN_NAME}_{k}" if len(chosen) > 1 else TRAIN_NAME, lengths[src], count)
        for k, (src, count) in enumerate(chosen.items(), start=1)
    ]
    return sorted(parts, key=lambda p: -p.longest)


def _rows_to_fill(lengths: Mapping[str, list[int]], names: Sequence[str], sequences: int, cutoff: int) -> int:
    """With packing, rows are packed into sequences of up to ``cutoff`` tokens: the longest rows until they fill
    ``sequences`` packed sequences (so the first batches are full ones), or all rows."""
    ranked = sorted((min(n, cutoff) for name in names for n in lengths.get(name, [])), reverse=True)
    total = 0
    for count, tokens in enumerate(ranked, start=1):
        total += tokens
        if total >= sequences * cutoff:
            return count
    return len(ranked)


def _eval_rows(config: ConfigFacts, lengths: Mapping[str, list[int]], needed: int) -> ProbeRows | None:
    """The longest validation rows, one eval batch per GPU (from the training data when val_size splits it)."""
    if not config.do_eval:
        return None
    sources = list(config.eval_dataset) or list(config.dataset)
    best = max(sources, key=lambda s: max(lengths.get(s, [0]) or [0]))
    return _longest_first(best, EVAL_NAME, lengths.get(best, []), needed)


def _notes(config: ConfigFacts, plan: ProbePlan) -> list[Text]:
    raw = config.raw
    longest = plan.longest_tokens
    notes = [
        both(
            "probe_how_sorted",
            batch=plan.micro_batch,
            longest=longest,
            padded=plan.padded(longest),
            tokens=plan.micro_batch * plan.padded(longest),
        )  # fmt: skip
    ]
    if longest > plan.cutoff_len:
        notes.append(both("probe_how_cut", longest=longest, cutoff=plan.cutoff_len))
    if raw.get("group_by_length"):
        notes.append(both("probe_how_group_by_length", batch=plan.micro_batch))
    if config.packing or raw.get("neat_packing"):
        key = "probe_how_neat_packing" if raw.get("neat_packing") else "probe_how_packing"
        notes.append(both(key, batch=plan.micro_batch, cutoff=plan.cutoff_len))
    if config.world_size > 1:
        notes.append(
            both("probe_how_world", gpus=config.world_size, rows=plan.micro_batch * config.world_size)
        )
    if plan.eval is None:
        notes.append(both("probe_how_no_eval"))
    else:
        longest_eval = plan.eval.longest
        notes.append(both("probe_how_eval", batch=plan.eval_batch, source=plan.eval.source, longest=longest_eval,
                          padded=plan.padded(longest_eval)))  # fmt: skip
        if not config.eval_dataset:
            notes.append(both("probe_how_val_size", val_size=config.val_size, batch=plan.eval_batch))
    if config.max_samples:
        notes.append(both("probe_how_max_samples", max_samples=config.max_samples))
    return notes


def _config_changes(
    config: ConfigFacts, data_dir: Path, dataset_dir: Path, plan: ProbePlan
) -> dict[str, Any]:
    raw = config.raw
    changes: dict[str, Any] = {
        "dataset": ",".join(part.name for part in plan.train),
        "dataset_dir": str(data_dir),
        "disable_shuffling": True,  # the sequential sampler: the derived order is the training order
    }
    if plan.eval is not None:
        changes["eval_dataset"] = EVAL_NAME
    if config.val_size:
        changes["val_size"] = 0.0
    if raw.get("mix_strategy") not in (None, "concat"):
        changes["mix_strategy"] = "concat"
    if raw.get("max_samples") is not None:
        changes["max_samples"] = None  # already applied when the rows were chosen
    if raw.get("tokenized_path"):
        changes["tokenized_path"] = None  # a saved tokenized set would replace the derived dataset
    if not raw.get("media_dir"):
        changes["media_dir"] = str(dataset_dir)  # images and videos stay where the rows point
    return changes


def resolve_dataset_dir(config: ConfigFacts, cwd: Path) -> Path:
    """dataset_dir as LLaMA-Factory resolves it from ``cwd`` (else beside the config file)."""
    value = Path(config.dataset_dir or "data").expanduser()
    candidates = [value] if value.is_absolute() else [cwd / value]
    if config.path and not config.path.startswith("<") and not value.is_absolute():
        candidates.append(Path(config.path).parent / value)
    for candidate in candidates:
        if (candidate / "dataset_info.json").is_file():
            return candidate.resolve()
    raise BadInput(msg("probe_no_info", None, path=candidates[0] / "dataset_info.json", detail="not found"))


def plan_probe(
    config: ConfigFacts,
    data_dir: Path,
    *,
    steps: int,
    cwd: Path,
    lengths: RowLengths | None = None,
) -> ProbePlan:
    """Measure every row's real token count and decide the probe's rows and config keys (nothing written).

    ``lengths`` counts rows (default: LLaMA-Factory's loader and template, ``facts.dataset.row_lengths``).
    BadInput when the data are not local files listed in ``dataset_info.json``.
    """
    if not config.dataset:
        raise BadInput(msg("len_no_dataset", None, path=config.path))
    dataset_dir = resolve_dataset_dir(config, cwd)
    info = _read_info(dataset_dir)
    eval_sources = list(config.eval_dataset) if config.do_eval else []
    names = list(dict.fromkeys([*config.dataset, *eval_sources]))
    _check_local(info, names)
    if lengths is None:
        from oomdoctor.facts.dataset import row_lengths

        lengths = row_lengths
    with _in_dir(cwd):
        measured = lengths(config, names)
    world = max(1, int(config.world_size or 1))
    micro = int(config.per_device_train_batch_size)
    needed = micro * int(config.gradient_accumulation_steps) * world * max(1, steps)
    if config.packing or config.raw.get("neat_packing"):
        needed = _rows_to_fill(measured, list(config.dataset), needed, int(config.cutoff_len))
    eval_batch = int(config.per_device_eval_batch_size)
    plan = ProbePlan(
        data_dir=data_dir,
        dataset_dir=dataset_dir,
        info=info,
        train=_train_rows(list(config.dataset), measured, needed),
        eval=_eval_rows(config, measured, eval_batch * world),
        changes={},
        micro_batch=micro,
        eval_batch=eval_batch,
        cutoff_len=int(config.cutoff_len),
    )
    plan.changes = _config_changes(config, data_dir, dataset_dir, plan)
    plan.how = _notes(config, plan)
    return plan


@contextlib.contextmanager
def _in_dir(path: Path) -> Any:
    """Relative dataset paths resolve as they will for the launcher, which runs in ``path``."""
    import os

    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


# --- Writing the derived copy --------------------------------------------------------------------------------


def _source_files(dataset_dir: Path, entry: Mapping[str, Any]) -> list[str]:
    """The files LLaMA-Factory reads for a local entry, in its order (a folder: os.listdir order)."""
    import os

    local = dataset_dir / str(entry["file_name"])
    if local.is_dir():
        return [str(local / name) for name in os.listdir(local)]
    if local.is_file():
        return [str(local)]
    raise BadInput(msg("probe_unknown_dataset", None, name=str(entry["file_name"])))


def _write_rows(dataset_dir: Path, entry: Mapping[str, Any], rows: Sequence[int], target: Path) -> None:
    """Copy ``rows`` of a local dataset, in that order, into a JSON-lines file with the same columns."""
    files = _source_files(dataset_dir, entry)
    source = (
        _json_rows(files)
        if all(f.endswith((".json", ".jsonl")) for f in files)
        else _table_rows(files, entry)
    )
    with target.open("w", encoding="utf-8") as out:
        for index in rows:
            out.write(json.dumps(source[int(index)], ensure_ascii=False, default=str) + "\n")


def _json_rows(files: Sequence[str]) -> list[Any]:
    """Rows of JSON files as ``datasets``' json loader reads them: a list per file, or one object a line."""
    rows: list[Any] = []
    for name in files:
        text = Path(name).read_text(encoding="utf-8-sig")
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = [json.loads(line) for line in text.splitlines() if line.strip()]
        rows += loaded if isinstance(loaded, list) else [loaded]
    return rows


def _table_rows(files: Sequence[str], entry: Mapping[str, Any]) -> Any:
    """Rows of csv / parquet / arrow / text files, read the way LLaMA-Factory reads them (``datasets``)."""
    import tempfile

    import datasets
    from llamafactory.extras.constants import FILEEXT2TYPE

    kind = FILEEXT2TYPE.get(Path(files[0]).suffix.lstrip("."))
    if kind is None:
        raise BadInput(msg("probe_unknown_dataset", None, name=str(entry["file_name"])))
    bars_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        with tempfile.TemporaryDirectory(prefix="oomdoctor-probe-") as scratch:
            return datasets.load_dataset(kind, data_files=list(files), split=str(entry.get("split") or "train"),
                                         cache_dir=scratch, keep_in_memory=True)  # fmt: skip
    finally:
        if bars_on:
            datasets.enable_progress_bars()


# --- Milestones ----------------------------------------------------------------------------------------------


def _process_hwm_mib(pids: Sequence[int]) -> float | None:
    """The largest resident-set high-water mark (``VmHWM``) among ``pids``: the true RSS peak, which a
    200 ms sampler can miss when a long batch's buffers live for less than a tick."""
    best: float | None = None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        kib = float(line.split()[1])
                        best = kib / 1024 if best is None else max(best, kib / 1024)
                        break
        except (OSError, ValueError, IndexError):
            continue
    return best


class MilestoneClock:
    """Notes the moment each milestone is seen during a trial (thread-safe: lines arrive on the log thread).

    ``on_line`` sees the training output, ``poll`` is called by the runner's loop with the progress read
    from ``trainer_log.jsonl`` and the checkpoints present; ``pids`` gives the trial's live processes, whose
    RSS high-water mark is noted at each moment (on a CPU machine the exact peak so far).
    """

    def __init__(self, started: float, pids: Callable[[], Sequence[int]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self._started = started
        self._pids = pids
        self._clock = clock
        self._lock = threading.Lock()
        self.seen: dict[str, dict[str, Any]] = {}
        self.hwm_mib: float | None = None
        self._save_started = False

    def _note(self, name: str, **facts: Any) -> None:
        with self._lock:
            if name not in self.seen:
                self.seen[name] = {
                    "time_s": round(self._clock() - self._started, 3),
                    "rss_hwm_mib": self.hwm_mib,
                    **facts,
                }

    def on_line(self, line: str) -> None:
        if _LOAD_MARK in line:
            self._note("load", step=0)
        elif _SAVE_MARK in line:
            self._save_started = True

    def poll(self, *, steps_done: int, eval_loss: float | None, checkpoints: Sequence[str]) -> None:
        if self._pids is not None:
            hwm = _process_hwm_mib(list(self._pids()))
            if hwm is not None:
                self.hwm_mib = hwm if self.hwm_mib is None else max(self.hwm_mib, hwm)
        if steps_done >= 1:
            self._note("load", step=0)
            self._note("longest_batch", step=1)
            self._note("optimizer_step", step=1)
        if eval_loss is not None:
            self._note("eval", step=steps_done)
        if checkpoints:
            self._note("save", step=_checkpoint_step(checkpoints[-1]))


def _checkpoint_step(name: str) -> int | None:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def read_samples(path: Path) -> list[tuple[float, float]]:
    """(time_s, highest reading over the GPUs or the host) per sample tick of ``gpu-samples.csv``."""
    ticks: dict[float, float] = {}
    with contextlib.suppress(OSError, KeyError, ValueError), path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            t, mib = float(row["time_s"]), float(row["memory_used_mib"])
            ticks[t] = max(ticks.get(t, 0.0), mib)
    return sorted(ticks.items())


def read_vram(path: Path) -> dict[str, dict[str, float]]:
    """RECORD_VRAM peaks (GiB) from ``trainer_log.jsonl``: at the first training step and at the first eval."""
    found: dict[str, dict[str, float]] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if not isinstance(entry, dict) or not isinstance(entry.get("vram_allocated"), int | float):
                    continue
                kind = "eval" if "eval_loss" in entry else "train" if "loss" in entry else None
                if kind and kind not in found:
                    found[kind] = {"allocated": float(entry["vram_allocated"]) + 0.0,
                                   "reserved": float(entry.get("vram_reserved") or 0.0) + 0.0}  # fmt: skip
    return found


def _peak(samples: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    values = [mib for t, mib in samples if start < t <= end]
    return round(max(values), 1) if values else None


def milestones(
    seen: Mapping[str, Mapping[str, Any]],
    *,
    samples: Sequence[tuple[float, float]],
    vram: Mapping[str, Mapping[str, float]],
    evaluates: bool,
    saves: bool = True,
    failed_phase: str | None,
    end_s: float,
) -> list[dict[str, Any]]:
    """Each milestone in order: passed or not, its step, the memory peak up to it (``peak_mib``, the whole
    trial so far, as RECORD_VRAM counts) and since the previous one (``phase_peak_mib``).

    A failure in the optimizer step means the longest micro-batch's forward/backward passed. Milestones after
    the first one missed are ``reached: false``.
    """
    seen = dict(seen)
    if failed_phase == "optimizer_step" and "longest_batch" not in seen:
        seen["longest_batch"] = {"time_s": end_s, "step": 1, "rss_hwm_mib": None}
    out: list[dict[str, Any]] = []
    previous = -1.0
    missed = False
    for name in MILESTONES:
        if (name == "eval" and not evaluates) or (name == "save" and not saves):
            out.append({"name": name, "passed": None, "applies": False})
            continue
        moment = seen.get(name)
        if moment is None or missed:
            record = {"name": name, "passed": False, "reached": not missed}
            if not missed:
                record.update({"peak_mib": _peak(samples, -1.0, end_s), "phase_peak_mib": _peak(samples, previous, end_s),
                               "failed_phase": failed_phase})  # fmt: skip
            missed = True
            out.append(record)
            continue
        t = float(moment["time_s"])
        record = {"name": name, "passed": True, "step": moment.get("step"), "time_s": t,
                  "peak_mib": _peak(samples, -1.0, t), "phase_peak_mib": _peak(samples, previous, t),
                  "rss_hwm_mib": _round(moment.get("rss_hwm_mib"))}  # fmt: skip
        kind = "train" if name in ("longest_batch", "optimizer_step") else "eval" if name == "eval" else None
        if kind is not None and kind in vram:
            record["vram_allocated_gib"] = vram[kind]["allocated"]
            record["vram_reserved_gib"] = vram[kind]["reserved"]
        out.append(record)
        previous = max(previous, t)
    return out


def _round(value: Any) -> float | None:
    return round(float(value), 1) if isinstance(value, int | float) else None


def all_passed(marks: Sequence[Mapping[str, Any]]) -> bool:
    return all(m.get("passed") is not False for m in marks)


# --- The probe inside a trial ----------------------------------------------------------------------------------


class ProbeRun:
    """What ``run_trial(..., probe=True)`` adds to a trial: the plan's data, the milestone clock, the record."""

    def __init__(self, plan: ProbePlan, *, evaluates: bool, saves: bool = True) -> None:
        self.plan = plan
        self.evaluates = evaluates
        self.saves = saves
        self.clock: MilestoneClock | None = None

    def start(self, started: float, pids: Callable[[], Sequence[int]]) -> None:
        self.clock = MilestoneClock(started, pids)

    def line_hook(self, on_line: Callable[[str], None] | None) -> Callable[[str], None]:
        def hook(line: str) -> None:
            if self.clock is not None:
                self.clock.on_line(line)
            if on_line is not None:
                on_line(line)

        return hook

    def poll(self, *, steps_done: int, eval_loss: float | None, checkpoints: Sequence[str]) -> None:
        if self.clock is not None:
            self.clock.poll(steps_done=steps_done, eval_loss=eval_loss, checkpoints=checkpoints)

    @staticmethod
    def calibrates(record: Mapping[str, Any]) -> bool:
        """A probe calibrates the estimate once its longest batch has passed: a failed one is capped by the
        memory it ran out of and would only give a lower bound."""
        return any(
            m.get("name") == "longest_batch" and m.get("passed") for m in record.get("milestones") or []
        )

    def record(
        self, *, samples_csv: Path, trainer_log: Path, failed_phase: str | None, end_s: float
    ) -> dict[str, Any]:
        """The keys a probe adds to result.json: ``probe`` (the plan), ``milestones``, ``probe_passed``."""
        seen = self.clock.seen if self.clock is not None else {}
        marks = milestones(seen, samples=read_samples(samples_csv), vram=read_vram(trainer_log),
                           evaluates=self.evaluates, saves=self.saves, failed_phase=failed_phase,
                           end_s=end_s)  # fmt: skip
        return {
            "probe": self.plan.to_json(),
            "milestones": marks,
            "probe_passed": all_passed(marks),
            "rss_hwm_mib": _round(self.clock.hwm_mib) if self.clock is not None else None,
        }
