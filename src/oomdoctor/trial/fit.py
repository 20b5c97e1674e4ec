"""``fit``: the largest micro-batch (and eval batch) that fits, the effective batch kept, verified by a probe.

From the estimate (calibrated when a probe of the same setting stored a calibration) it picks the largest
``per_device_train_batch_size`` whose predicted peak stays under ``(1 - margin)`` of the memory budget, with
``gradient_accumulation_steps`` chosen so that batch x accumulation x GPUs stays what it was, then separately
the largest ``per_device_eval_batch_size``. One probe trial verifies the choice. If it runs out, the
calibration is raised to what the failure proves (the need exceeded the budget), the next smaller candidate
the corrected estimate allows is probed once more, and that is the end: two probes at most, never the same
config twice. The winner is written as a patch folder (``config.yaml``, ``change.json``, the diff, the command)
with every candidate tried (its patch folder and probe) under ``tried/`` and the table in ``fit.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oomdoctor.errors import BadInput
from oomdoctor.facts.types import ConfigFacts, DataFacts, GpuFacts, ModelFacts
from oomdoctor.i18n import both, msg
from oomdoctor.records import asdict
from oomdoctor.report import units
from oomdoctor.text import Text

DEFAULT_MARGIN = 0.1
MAX_PROBES = 2
RULE_ID = "fit.largest_fitting_batch"
FAILURE_SLACK = 1.05  # after a failure, the need is taken 5 % above the budget it exceeded


@dataclass(frozen=True)
class Candidate:
    """One config fit may try: micro-batch, accumulation, eval batch, and what the estimate predicts."""

    micro_batch: int
    accumulation: int
    eval_batch: int
    predicted_mib: float
    train_mib: float
    eval_mib: float

    def changes(self, config: ConfigFacts) -> dict[str, list[Any]]:
        """``{field: [old, new]}`` for the fields this candidate changes."""
        pairs = {
            "per_device_train_batch_size": (config.per_device_train_batch_size, self.micro_batch),
            "gradient_accumulation_steps": (config.gradient_accumulation_steps, self.accumulation),
            "per_device_eval_batch_size": (config.per_device_eval_batch_size, self.eval_batch),
        }
        if not config.do_eval:
            pairs.pop("per_device_eval_batch_size")
        return {k: [old, new] for k, (old, new) in pairs.items() if old != new}

    @property
    def label(self) -> str:
        return f"b{self.micro_batch}-acc{self.accumulation}-eval{self.eval_batch}"


@dataclass
class Tried:
    """A candidate that was probed, and what happened."""

    candidate: Candidate
    folder: str
    outcome: str
    passed: bool
    peak_mib: float | None
    failed_milestone: str | None
    wall_s: float | None


@dataclass
class FitResult:
    """What fit decided and verified (``fit.json``)."""

    budget_mib: float
    margin: float
    limit_mib: float
    effective_batch: int
    world_size: int
    calibrated_by: str | None
    tried: list[Tried] = field(default_factory=list)
    winner: Candidate | None = None
    unchanged: bool = False  # the config as it is was the winner: no patch to write
    folder: str | None = None
    command: str | None = None
    diff: str | None = None
    notes: list[Text] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.winner is not None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # records.asdict: a Proposal and the notes' Texts are records, not dataclasses
        data["ok"] = self.ok
        data["probes"] = len(self.tried)
        if self.winner is not None:
            data["effective_batch_after"] = (
                self.winner.micro_batch * self.winner.accumulation * self.world_size
            )
            data["effective_batch_kept"] = data["effective_batch_after"] == self.effective_batch
        return data


# --- Predicting --------------------------------------------------------------------------------------------------


class Predictor:
    """The peak the estimate predicts for a micro-batch / accumulation / eval batch (MiB): with a calibration
    what the card (or the RSS) shows at the worst batch, else the expected nvidia-smi band's high end."""

    def __init__(
        self, config: ConfigFacts, model: ModelFacts, data: DataFacts | None, calibration: Any
    ) -> None:
        self.config = config
        self.model = model
        self.data = data
        self.calibration = calibration

    def __call__(self, micro_batch: int, accumulation: int, eval_batch: int) -> Candidate:
        from oomdoctor.estimate import estimate, with_changes

        trial = with_changes(self.config, {"per_device_train_batch_size": micro_batch,
                                           "gradient_accumulation_steps": accumulation,
                                           "per_device_eval_batch_size": eval_batch})  # fmt: skip
        result = estimate(trial, self.model, data=self.data, calibration=self.calibration)
        if self.calibration is not None:
            k = self.calibration.constants
            shown = {p: v * k["reserve_factor"] + k["context_mib"] for p, v in result.phases.items()}
            predicted = result.expected_nvidia_smi_mib[0]
        else:
            ratio = result.expected_nvidia_smi_mib[1] / max(1.0, result.peak_allocated_mib)
            shown = {p: v * ratio for p, v in result.phases.items()}
            predicted = result.expected_nvidia_smi_mib[1]
        return Candidate(micro_batch, accumulation, eval_batch, round(predicted, 1),
                         round(shown["train"], 1), round(shown["eval"], 1))  # fmt: skip


def exact_micro_batches(config: ConfigFacts) -> list[int]:
    """Micro-batches that keep batch x accumulation exactly (its divisors), largest first."""
    from oomdoctor.estimate import micro_batch_candidates

    return micro_batch_candidates(config)


def choose(predict: Predictor, limit_mib: float, *, below: Candidate | None = None,
           failed_phase: str | None = None) -> Candidate | None:  # fmt: skip
    """The largest exact micro-batch whose training peak fits ``limit_mib``, then the largest eval batch (up to
    the config's) that fits with it. ``below``: a candidate that failed in ``failed_phase``; the answer is a
    different, smaller config (the eval batch steps down after an eval failure, the micro-batch otherwise)."""
    config = predict.config
    per_device = config.per_device_train_batch_size * config.gradient_accumulation_steps
    ceiling = int(config.per_device_eval_batch_size)
    for micro in exact_micro_batches(config):
        if below is not None and (
            micro > below.micro_batch or (micro == below.micro_batch and failed_phase != "eval")
        ):
            continue
        accumulation = per_device // micro
        if predict(micro, accumulation, 1 if config.do_eval else ceiling).train_mib > limit_mib:
            continue
        top = below.eval_batch - 1 if below is not None and micro == below.micro_batch else ceiling
        for eval_batch in range(top, 0, -1) if config.do_eval else [ceiling]:
            candidate = predict(micro, accumulation, eval_batch)
            if candidate.predicted_mib <= limit_mib:
                return candidate
    return None


def nearest_inexact(predict: Predictor, limit_mib: float, exact: Candidate) -> dict[str, Any] | None:
    """A larger micro-batch that is not a divisor but would fit: what the effective batch would become."""
    config = predict.config
    per_device = config.per_device_train_batch_size * config.gradient_accumulation_steps
    for micro in range(min(per_device, exact.micro_batch * 2), exact.micro_batch, -1):
        if per_device % micro == 0:
            continue
        accumulation = max(1, round(per_device / micro))
        if predict(micro, accumulation, 1).train_mib <= limit_mib:
            return {"micro_batch": micro, "accumulation": accumulation,
                    "effective_batch": micro * accumulation * max(1, config.world_size)}  # fmt: skip
    return None


def raised_by_failure(
    calibration: Any, predict: Predictor, failed: Candidate, phase: str, budget_mib: float
) -> Any:
    """The calibration corrected by a failure: the failed phase needed more than ``budget_mib``, so the
    activation factor is at least what makes its prediction exceed it (by ``FAILURE_SLACK``)."""
    from oomdoctor.estimate import with_changes
    from oomdoctor.estimate.calibrate import Calibration, default_constants, setting_of, split_phases

    trial = with_changes(predict.config, {"per_device_train_batch_size": failed.micro_batch,
                                          "gradient_accumulation_steps": failed.accumulation,
                                          "per_device_eval_batch_size": failed.eval_batch})  # fmt: skip
    static, per_token = split_phases(trial, predict.model, predict.data)[
        "eval" if phase == "eval" else "train"
    ]
    base = calibration
    constants = dict(base.constants) if base is not None else default_constants()
    if per_token <= 0:
        return base
    needed = (budget_mib * FAILURE_SLACK - constants["context_mib"]) / constants["reserve_factor"]
    scale = max(constants["activation_scale"], (needed - static) / per_token)
    constants["activation_scale"] = round(scale, 4)
    fitted = sorted(set([*(base.fitted if base is not None else []), "activation_scale"]))
    setting = base.setting if base is not None else setting_of(predict.config, None)
    return Calibration(setting=setting, constants=constants, fitted=fitted,
                       trial=(base.trial if base is not None else None), source=base.source if base else None,
                       points=base.points if base is not None else [])  # fmt: skip


# --- Running ----------------------------------------------------------------------------------------------------


def _proposal(config: ConfigFacts, candidate: Candidate, result: FitResult) -> Any:
    from oomdoctor.diagnosis import Proposal

    effective = candidate.micro_batch * candidate.accumulation * max(1, config.world_size)
    return Proposal(
        rule=RULE_ID,
        title=both(
            "fit_title",
            batch=candidate.micro_batch,
            accumulation=candidate.accumulation,
            eval_batch=candidate.eval_batch,
        ),  # fmt: skip
        changes=candidate.changes(config),
        why=both(
            "fit_why",
            budget=units.mib(result.budget_mib, unit=False),
            margin=round(result.margin * 100),
            predicted=units.mib(candidate.predicted_mib, unit=False),
            effective=effective,
        ),  # fmt: skip
        cost=both("fit_cost"),
        judge=both("fit_judge", effective=effective),
        cause="activations",
    )


def _probe_one(config_path: Path, config: ConfigFacts, candidate: Candidate, result: FitResult, staging: Path,
               run: Callable[..., Any], index: int) -> Tried:  # fmt: skip
    from oomdoctor.patch import write_patched_config

    folder = staging / f"{index}-{candidate.label}"
    changes = candidate.changes(config)
    if changes:
        patch = write_patched_config(config_path, _proposal(config, candidate, result), folder)
        target = patch.config_path
    else:
        folder.mkdir(parents=True)
        target = config_path
    trial = run(target, folder / "probe")
    record = trial.record
    failed = next((m["name"] for m in record.get("milestones") or [] if m.get("passed") is False and m.get("reached")),
                  None)  # fmt: skip
    return Tried(candidate=candidate, folder=str(folder), outcome=record["outcome"],
                 passed=bool(record["ok"] and record.get("probe_passed")), peak_mib=record.get("peak_memory_mib"),
                 failed_milestone=failed, wall_s=record.get("wall_s"))  # fmt: skip


def run_fit(
    config_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    budget_mib: float | None = None,
    margin: float = DEFAULT_MARGIN,
    launcher: str | None = None,
    timeout_s: float = 600,
    data: DataFacts | None = None,
    on_line: Callable[[str], None] | None = None,
    on_tried: Callable[[Tried], None] | None = None,
    on_probe: Callable[[int, Candidate], None] | None = None,
    source: Any = None,
    trial_kwargs: dict[str, Any] | None = None,
) -> FitResult:
    """Choose, verify (at most two probes) and write the winner into the new folder ``out_dir``.

    ``budget_mib``: the memory to fit in (default: the first visible GPU's total). ``data``: known lengths
    (default: measured through LLaMA-Factory's template, as a probe measures them). BadInput when ``out_dir``
    exists, the margin is not in [0, 0.9], no budget is known, or nothing fits even at micro-batch 1.
    """
    out = _new_out_dir(out_dir, margin)
    setting = _read_setting(config_path, budget_mib=budget_mib, data=data, source=source)
    limit = setting.budget_mib * (1 - margin)
    result = _fit_result(setting, margin, limit)
    first = _first_candidate(setting, limit, result)
    run = _probe_runner(launcher, timeout_s, on_line, source, trial_kwargs)
    prober = _Prober(setting, result, _staging_folder(out), run, on_probe=on_probe, on_tried=on_tried)
    try:
        prober.probe_from(first, limit=limit)
    finally:
        _finish(out, prober.staging, setting.config_file, setting.config, result)
    return result


@dataclass(frozen=True)
class _Setting:
    """What fit works from: the config, the memory budget and the estimate (calibrated when one is stored)."""

    config_file: Path
    config: ConfigFacts
    budget_mib: float
    calibration: Any
    predict: Predictor


def _new_out_dir(out_dir: str | os.PathLike[str], margin: float) -> Path:
    """The folder to write, which must not exist yet; BadInput too when the margin is not in [0, 0.9]."""
    out = Path(out_dir).expanduser().absolute()
    if out.exists() or out.is_symlink():
        raise BadInput(msg("out_exists", None, path=out))
    if not 0 <= margin <= 0.9:
        raise BadInput(msg("fit_bad_margin", None, value=margin))
    return out


def _read_setting(
    config_path: str | os.PathLike[str], *, budget_mib: float | None, data: DataFacts | None, source: Any
) -> _Setting:
    """Read the config, the model, the card and the lengths (measured when not given), and the calibration
    stored for this setting on this card."""
    from oomdoctor.estimate.calibrate import HOST_CARD, find_calibration
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.gpu import NvmlSource, read_gpu

    config_file = Path(config_path).expanduser().absolute()
    config = read_config(config_file)
    model = _known_model(config)
    gpu = read_gpu(source if source is not None else NvmlSource())
    budget = _budget(gpu, budget_mib)
    card = gpu.first.name if gpu.first is not None else HOST_CARD
    if data is None:
        data = _measured_lengths(config)
    calibration = find_calibration(config, card)
    predict = Predictor(config, model, data, calibration)
    return _Setting(config_file=config_file, config=config, budget_mib=budget, calibration=calibration,
                    predict=predict)  # fmt: skip


def _fit_result(setting: _Setting, margin: float, limit: float) -> FitResult:
    """The result before any probe: the budget, the limit, the effective batch to keep, the calibration."""
    config, calibration = setting.config, setting.calibration
    result = FitResult(budget_mib=float(setting.budget_mib), margin=margin, limit_mib=round(limit, 1),
                       effective_batch=config.effective_batch, world_size=max(1, config.world_size),
                       calibrated_by=calibration.trial if calibration is not None else None)  # fmt: skip
    if calibration is None:
        result.notes.append(both("fit_uncalibrated"))
    return result


def _first_candidate(setting: _Setting, limit: float, result: FitResult) -> Candidate:
    """The largest batch the estimate fits under ``limit`` (BadInput when none), noting a larger one that
    would fit with the effective batch not kept exactly."""
    first = choose(setting.predict, limit)
    if first is None:
        raise BadInput(
            msg(
                "fit_nothing_fits",
                None,
                limit=units.mib(limit, unit=False),
                budget=units.mib(setting.budget_mib, unit=False),
            )
        )
    extra = nearest_inexact(setting.predict, limit, first)
    if extra is not None:
        result.notes.append(both("fit_inexact", **extra, effective_now=setting.config.effective_batch))
    return first


def _staging_folder(out: Path) -> Path:
    """A hidden folder beside ``out`` where the tries are made before they move under ``out/tried``."""
    return Path(tempfile.mkdtemp(prefix=f".{out.name}-fit-", dir=out.parent if out.parent.is_dir() else None))


def _probe_runner(
    launcher: str | None,
    timeout_s: float,
    on_line: Callable[[str], None] | None,
    source: Any,
    trial_kwargs: dict[str, Any] | None,
) -> Callable[[Path, Path], Any]:
    """``run(config, folder)``: a one-step probe trial of ``config`` into ``folder``."""
    from oomdoctor.trial.runner import DEFAULT_LAUNCHER, run_trial

    def run(target: Path, folder: Path) -> Any:
        return run_trial(target, steps=1, out_dir=folder, probe=True, timeout_s=timeout_s,
                         launcher=launcher or DEFAULT_LAUNCHER, on_line=on_line, source=source,
                         **(trial_kwargs or {}))  # fmt: skip

    return run


@dataclass
class _Prober:
    """Probes candidates one after another, at most MAX_PROBES and never the same config twice."""

    setting: _Setting
    result: FitResult
    staging: Path
    run: Callable[[Path, Path], Any]
    on_probe: Callable[[int, Candidate], None] | None = None
    on_tried: Callable[[Tried], None] | None = None

    def probe_from(self, first: Candidate, *, limit: float) -> None:
        """Probe ``first``; after an OOM, the next candidate the corrected estimate allows; until one
        passes."""
        result, predict = self.result, self.setting.predict
        candidate: Candidate | None = first
        seen: set[tuple[int, int, int]] = set()
        while candidate is not None and len(result.tried) < MAX_PROBES:
            key = (candidate.micro_batch, candidate.accumulation, candidate.eval_batch)
            if key in seen:
                break
            seen.add(key)
            tried = self.probe(candidate)
            if tried.passed:
                result.winner = candidate
                break
            if tried.outcome != "oom":
                result.notes.append(both("fit_not_memory", outcome=tried.outcome))
                break  # a smaller batch does not cure a failure that is not about memory
            predict, candidate = _after_oom(
                predict, candidate, tried, result, limit=limit, budget_mib=self.setting.budget_mib
            )

    def probe(self, candidate: Candidate) -> Tried:
        """One probe of ``candidate``, told to the callers before and after, and kept in the result."""
        index = len(self.result.tried) + 1
        if self.on_probe is not None:
            self.on_probe(index, candidate)
        setting = self.setting
        tried = _probe_one(setting.config_file, setting.config, candidate, self.result, self.staging,
                           self.run, index)  # fmt: skip
        self.result.tried.append(tried)
        if self.on_tried is not None:
            self.on_tried(tried)
        return tried


def _known_model(config: ConfigFacts) -> ModelFacts:
    """The model's facts; BadInput when its config.json does not give its size."""
    from oomdoctor.facts.model import read_model

    model = read_model(config)
    if not model.hidden_size:
        raise BadInput(
            msg("est_model_unknown", None, name=config.model_name_or_path or "?", missing="config.json")
        )
    return model


def _budget(gpu: GpuFacts, budget_mib: float | None) -> float:
    """The memory to fit in: the one given, else the first visible GPU's total (BadInput when none)."""
    if budget_mib is not None:
        return budget_mib
    if gpu.first is None:
        raise BadInput(msg("fit_no_budget", None))
    return float(gpu.first.total_mib)


def _after_oom(
    predict: Predictor, failed: Candidate, tried: Tried, result: FitResult, *, limit: float, budget_mib: float
) -> tuple[Predictor, Candidate | None]:
    """After a probe ran out of memory: the estimate corrected by what it proved (saved) and the next candidate."""
    from oomdoctor.estimate.calibrate import save

    phase = "eval" if tried.failed_milestone == "eval" else "train"
    calibration = raised_by_failure(predict.calibration, predict, failed, phase, budget_mib)
    if calibration is not None:
        with contextlib.suppress(BadInput, OSError):
            save(calibration)  # later estimates of this setting start from what the failure proved
        result.notes.append(
            both("fit_recalibrated", scale=units.number(calibration.constants["activation_scale"], 3))
        )
    predict = Predictor(predict.config, predict.model, predict.data, calibration)
    candidate = choose(predict, limit, below=failed, failed_phase=phase) or _step_down(predict, failed, phase)
    return predict, candidate


def _step_down(predict: Predictor, failed: Candidate, phase: str) -> Candidate | None:
    """The next smaller candidate when even the corrected estimate fits none: one step, never a repeat."""
    config = predict.config
    per_device = config.per_device_train_batch_size * config.gradient_accumulation_steps
    if phase == "eval" and failed.eval_batch > 1:
        return predict(failed.micro_batch, failed.accumulation, max(1, failed.eval_batch // 2))
    smaller = [b for b in exact_micro_batches(config) if b < failed.micro_batch]
    if not smaller:
        return None
    micro = smaller[0]
    return predict(micro, per_device // micro, failed.eval_batch)


def _finish(out: Path, staging: Path, config_file: Path, config: ConfigFacts, result: FitResult) -> None:
    """Write the winner's patch folder (or a plain folder when there is none), move the tries under it,
    and write fit.json."""
    from oomdoctor.patch import write_patched_config

    winner = result.winner
    if winner is not None and winner.changes(config):
        patch = write_patched_config(config_file, _proposal(config, winner, result), out)
        result.folder, result.command, result.diff = str(patch.folder), patch.command, patch.diff
        (out / "config.diff").write_text(patch.diff, encoding="utf-8")
    else:
        out.mkdir(parents=True)
        result.unchanged = winner is not None
        result.folder = str(out)
    shutil.move(str(staging), str(out / "tried"))
    for tried in result.tried:
        tried.folder = str(out / "tried" / Path(tried.folder).name)
    (out / "fit.json").write_text(json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n",
                                  encoding="utf-8")  # fmt: skip


def _measured_lengths(config: ConfigFacts) -> DataFacts | None:
    """The dataset's real lengths (LLaMA-Factory's template); None when they cannot be measured here."""
    from oomdoctor.facts.dataset import token_lengths

    try:
        return token_lengths(config)
    except BadInput:
        return None
