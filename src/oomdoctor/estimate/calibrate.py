"""Calibration: fit the memory model's stack-dependent constants to what a trial measured.

The estimate's byte counts come from reading the code (``memory_model.yaml``); three numbers depend on the
stack it runs on and are only known from a measurement: the per-token activation factor (``activation_scale``:
how many times the modelled activations and logits the run really keeps; ``eval_activation_scale`` the same
for the eval batch's forward-only working set, a different code path), the allocator reserve
(``reserve_factor``: reserved / allocated, PyTorch's caching allocator; 1 for a CPU's RSS) and the CUDA context
(``context_mib``: what the card shows beyond PyTorch's reserve; on a CPU the process's resident baseline:
interpreter, libraries, dataset). Each phase peak is modelled as ``static + activation_scale x per_token``
(``static`` and ``per_token`` from the estimator itself, evaluated with the factor at 0 and at 1), then
``x reserve_factor + context_mib`` for what nvidia-smi (or the process RSS) shows. A whole run with variable
lengths shows more than its worst batch (freed blocks of every shape stay cached): its maximum pins the
allocator's ``variable_length_creep`` instead.

A probe's milestones give the measured points: torch's allocated and reserved peaks (RECORD_VRAM in
``trainer_log.jsonl``) and NVML's reading on a GPU, the RSS high-water mark at load / first step / eval on a
CPU. A constant is fitted only where the points pin it down; the others keep the model's value and the
record says which came from calibration. The result is stored in the trial folder (``calibration.json``) and
in the user cache, keyed by model + precision + method + card + library versions, so later estimates of
the same setting use it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oomdoctor.errors import BadInput
from oomdoctor.facts.types import ConfigFacts, DataFacts, ModelFacts
from oomdoctor.i18n import both, msg
from oomdoctor.records import asdict, field, record
from oomdoctor.text import Text

SCHEMA = 1
CONSTANTS = (
    "activation_scale",
    "eval_activation_scale",
    "reserve_factor",
    "context_mib",
    "variable_length_creep",
)
RUN_KINDS = ("nvidia-smi-run", "reserved-run")  # whole-run maxima of a run with variable lengths
LIBRARIES = ("torch", "transformers", "peft", "llamafactory")
HOST_CARD = "host"  # the setting's card when the trial ran without an NVIDIA GPU (memory is the RSS)
NEW_PEAK = 1.01  # a later milestone counts as its own point only when it raised the peak by more than 1 %
MIB_PER_GIB = 1024.0


@record(frozen=True)
class Point:
    """One measured peak and the estimator's split of it: ``static + scale x per_token`` (MiB, allocated)."""

    phase: str  # load / train / eval
    kind: str  # allocated / reserved / nvidia-smi / rss
    measured_mib: float
    static_mib: float
    per_token_mib: float


@record
class Calibration:
    """Fitted constants of one setting, with what they were fitted on and how well they reproduce it."""

    setting: dict[str, Any]
    constants: dict[str, float]  # activation_scale, reserve_factor, context_mib (all three, fitted or not)
    fitted: list[str]  # which of the constants came from the measurement
    trial: str | None = None
    source: str | None = None  # nvml / host_rss
    points: list[dict[str, Any]] = field(default_factory=list)  # measured vs predicted before / after
    schema: int = SCHEMA

    @property
    def setting_id(self) -> str:
        return setting_id(self.setting)

    def memory_model(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """``memory_model.yaml``'s constants with the calibrated ones in place."""
        k = dict(base)
        k["activation_scale"] = self.constants["activation_scale"]
        k["eval_activation_scale"] = self.constants["eval_activation_scale"]
        if "reserve_factor" in self.fitted:
            r = self.constants["reserve_factor"]
            k["fixed_shape_reserve"] = [r, max(r, float(base["fixed_shape_reserve"][1]))]
        if "context_mib" in self.fitted:
            c = self.constants["context_mib"]
            k["cuda_context_mib"] = [c, c]
        if "variable_length_creep" in self.fitted:
            k["variable_length_creep"] = self.constants["variable_length_creep"]
        return k

    def headline(self) -> Text:
        """``calibrated by trial X: predicted 8.2 GiB, measured 7.9 GiB`` for the largest point."""
        best = max(self.points, key=lambda p: p["measured_mib"], default=None)
        if best is None:
            return both("cal_headline_no_points", trial=self.trial or "?")
        return both("cal_headline", trial=self.trial or "?", predicted=best["after_mib"] / MIB_PER_GIB,
                    measured=best["measured_mib"] / MIB_PER_GIB, kind=best["kind"])  # fmt: skip

    def describe(self) -> dict[str, Any]:
        """What an estimate reports about the calibration it used (``estimate --json``'s ``calibration``)."""
        return {
            "trial": self.trial,
            "setting_id": self.setting_id,
            "from_calibration": list(self.fitted),
            "constants": dict(self.constants),
            "text": self.headline(),
        }

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "setting_id": self.setting_id}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Calibration:
        return cls(
            setting=dict(data["setting"]),
            constants={
                **default_constants(),
                **{k: float(v) for k, v in data["constants"].items() if k in CONSTANTS},
            },
            fitted=[str(k) for k in data.get("fitted", [])],
            trial=data.get("trial"),
            source=data.get("source"),
            points=list(data.get("points", [])),
        )


def calibration_of(estimate: Any) -> Calibration | None:
    """The calibration a calibrated estimate used (from its ``calibration`` record), to estimate what-ifs of
    the same setting with it: ``estimate(changed, model, calibration=calibration_of(facts.estimate))``."""
    record = getattr(estimate, "calibration", None)
    if not record:
        return None
    return Calibration(setting={"setting_id": record.get("setting_id")},
                       constants={**default_constants(), **record["constants"]},
                       fitted=list(record["from_calibration"]), trial=record.get("trial"))  # fmt: skip


# --- The setting a calibration belongs to ----------------------------------------------------------------------


def library_versions() -> dict[str, str | None]:
    """Installed versions of the libraries whose kernels and allocator decide the constants (metadata only:
    nothing is imported)."""
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def setting_of(
    config: ConfigFacts, card: str | None, versions: Mapping[str, str | None] | None = None
) -> dict[str, Any]:
    """What must agree for a calibration to apply: model, precision, method, quantization, attention, card,
    library versions. Batch sizes and lengths may differ: that is what the calibrated estimate predicts."""
    return {
        "model": config.model_name_or_path,
        "precision": config.precision,
        "finetuning_type": config.finetuning_type,
        "quantization_bit": config.quantization_bit,
        "gradient_checkpointing": config.gradient_checkpointing,
        "flash_attn": config.flash_attn,
        "liger": config.enable_liger_kernel,
        "deepspeed_stage": config.zero_stage if config.deepspeed else None,
        "card": card or HOST_CARD,
        "versions": dict(versions if versions is not None else library_versions()),
    }


def setting_id(setting: Mapping[str, Any]) -> str:
    import hashlib  # only when a calibration is looked up or stored (OpenSSL costs a start milliseconds)

    return hashlib.sha256(json.dumps(setting, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/oomdoctor/calibration`` (default ``~/.cache/oomdoctor/calibration``)."""
    from oomdoctor.usercache import CALIBRATIONS, cache_root

    return cache_root() / CALIBRATIONS


def save(calibration: Calibration, trial_file: Path | None = None) -> Path:
    """Write the calibration into the user cache (and ``trial_file``); returns the cache file."""
    text = json.dumps(calibration.to_json(), indent=2, ensure_ascii=False) + "\n"
    if trial_file is not None:
        trial_file.write_text(text, encoding="utf-8")
    target = cache_dir() / f"{calibration.setting_id}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as err:
        raise BadInput(msg("cal_cache_unwritable", None, path=target, detail=err)) from None
    return target


def find_calibration(
    config: ConfigFacts, card: str | None, versions: Mapping[str, str | None] | None = None
) -> Calibration | None:
    """The stored calibration of this setting, if a trial made one (None when none, or unreadable). With no
    calibration stored at all, nothing is looked up (reading the libraries' versions costs a start ~30 ms)."""
    folder = cache_dir()
    if not folder.is_dir() or next(folder.glob("*.json"), None) is None:
        return None
    path = folder / f"{setting_id(setting_of(config, card, versions))}.json"
    try:
        return Calibration.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


# --- Fitting -------------------------------------------------------------------------------------------------


def split_phases(
    config: ConfigFacts, model: ModelFacts, data: DataFacts | None
) -> dict[str, tuple[float, float]]:
    """Each phase's allocated peak as (static, per_token) MiB: the estimator at activation factor 0 and 1."""
    from oomdoctor.estimate.memory import estimate

    zero = estimate(config, model, data=data, calibration=_Scale(0.0))
    one = estimate(config, model, data=data, calibration=_Scale(1.0))
    return {p: (zero.phases[p], max(0.0, one.phases[p] - zero.phases[p])) for p in one.phases}


def run_point(
    config: ConfigFacts, model: ModelFacts, data: DataFacts | None, kind: str, measured_mib: float
) -> Point:
    """A whole run's maximum (nvidia-smi, or torch's reserved) as a point linear in the creep factor: the
    estimator's band high end at creep 1 and 2 (the creep term dominates there)."""
    from oomdoctor.estimate.memory import estimate

    def high(creep: float) -> float:
        result = estimate(config, model, data=data, calibration=_Creep(creep))
        band = result.expected_nvidia_smi_mib if kind == "nvidia-smi-run" else result.expected_reserved_mib
        assert band is not None
        return float(band[1])

    one, two = high(1.0), high(2.0)
    return Point("run", kind, float(measured_mib), one - (two - one), two - one)


class _Creep:
    """A calibration that sets the variable-length creep only."""

    def __init__(self, creep: float) -> None:
        self.creep = creep

    def memory_model(self, base: Mapping[str, Any]) -> dict[str, Any]:
        return {**base, "variable_length_creep": self.creep}

    def describe(self) -> None:
        return None


class _Scale:
    """A calibration that sets the activation factor only (used to split the estimate)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def memory_model(self, base: Mapping[str, Any]) -> dict[str, Any]:
        return {**base, "activation_scale": self.scale, "eval_activation_scale": self.scale}

    def describe(self) -> None:
        return None


def _least_squares_scale(points: Sequence[Point], offset: float, reserve: float) -> float | None:
    """The factor a minimising sum((static + a x per_token) x reserve + offset - measured)^2."""
    usable = [p for p in points if p.per_token_mib > 0]
    den = sum((p.per_token_mib * reserve) ** 2 for p in usable)
    if not usable or den <= 0:
        return None
    num = sum(p.per_token_mib * reserve * (p.measured_mib - offset - p.static_mib * reserve) for p in usable)
    return max(0.0, num / den)


def _new_peaks(points: Sequence[Point]) -> list[Point]:
    """Points of a cumulative record that raised the peak: a later phase that needed less shows the earlier
    peak again and says nothing about itself."""
    kept: list[Point] = []
    best = 0.0
    for point in points:
        if point.measured_mib > best * NEW_PEAK:
            kept.append(point)
        best = max(best, point.measured_mib)
    return kept


def fit(points: Sequence[Point], defaults: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    """Fit the constants the points pin down; the rest keep ``defaults``. Returns (constants, fitted names).

    - allocated points fix the activation factor directly;
    - reserved next to allocated fixes the reserve factor; nvidia-smi next to reserved fixes the context;
    - RSS points (CPU): the load point (no activations yet) fixes the context, the later ones the factor;
    - reserved or nvidia-smi points alone fix the factor with the reserve at 1 (the combined per-token cost).
    """
    constants = {k: float(defaults[k]) for k in CONSTANTS}
    fitted: list[str] = []
    by_kind: dict[str, list[Point]] = {}
    for point in points:
        by_kind.setdefault(point.kind, []).append(point)
    allocated = _new_peaks(by_kind.get("allocated", []))
    reserved = by_kind.get("reserved", [])
    smi = by_kind.get("nvidia-smi", [])
    rss = by_kind.get("rss", [])
    runs = [p for kind in RUN_KINDS for p in by_kind.get(kind, [])]
    creep = _least_squares_scale(runs, 0.0, 1.0)
    if creep is not None:
        constants["variable_length_creep"] = creep
        fitted.append("variable_length_creep")
    if allocated:
        fitted += _fit_scales(allocated, constants, 0.0, 1.0)
        if reserved:
            top_alloc = max(p.measured_mib for p in allocated)
            constants["reserve_factor"] = max(p.measured_mib for p in reserved) / top_alloc
            fitted.append("reserve_factor")
    if reserved and smi:
        constants["context_mib"] = max(
            0.0, max(p.measured_mib for p in smi) - max(p.measured_mib for p in reserved)
        )
        fitted.append("context_mib")
    if rss:
        constants["reserve_factor"] = 1.0
        load = [p for p in rss if p.phase == "load"]
        if load:
            constants["context_mib"] = max(0.0, load[0].measured_mib - load[0].static_mib)
            fitted.append("context_mib")
        fitted += _fit_scales(
            _new_peaks([p for p in rss if p.phase != "load"]), constants, constants["context_mib"], 1.0
        )
    if not allocated and not rss and (reserved or smi):
        offset = constants["context_mib"] if smi and not reserved else 0.0
        constants["reserve_factor"] = 1.0
        scales = _fit_scales(_new_peaks(reserved or smi), constants, offset, 1.0)
        fitted += [*scales, "reserve_factor"] if scales else []
    return constants, sorted(set(fitted), key=CONSTANTS.index)


def _fit_scales(
    points: Sequence[Point], constants: dict[str, float], offset: float, reserve: float
) -> list[str]:
    """Fit the training factor on the training points and the eval factor on the eval points (the eval one
    follows the training one when no eval point raised the peak). Returns the names fitted."""
    fitted: list[str] = []
    train = _least_squares_scale([p for p in points if p.phase != "eval"], offset, reserve)
    if train is not None:
        constants["activation_scale"] = constants["eval_activation_scale"] = train
        fitted.append("activation_scale")
    evaluation = _least_squares_scale([p for p in points if p.phase == "eval"], offset, reserve)
    if evaluation is not None:
        constants["eval_activation_scale"] = evaluation
        if train is None:
            constants["activation_scale"] = evaluation
        fitted.append("eval_activation_scale")
    return fitted


def predicted(point: Point, constants: Mapping[str, float]) -> float:
    """The point as the constants predict it, in the point's own kind."""
    if point.kind in RUN_KINDS:
        return point.static_mib + constants["variable_length_creep"] * point.per_token_mib
    scale = constants["eval_activation_scale" if point.phase == "eval" else "activation_scale"]
    allocated = point.static_mib + scale * point.per_token_mib
    if point.kind == "allocated":
        return allocated
    if point.kind == "reserved":
        return allocated * constants["reserve_factor"]
    return allocated * constants["reserve_factor"] + constants["context_mib"]


def cumulative_predictions(points: Sequence[Point], constants: Mapping[str, float]) -> list[float]:
    """Predictions of a cumulative record (each milestone's peak so far), per kind."""
    out: list[float] = []
    best: dict[str, float] = {}
    for point in points:
        value = max(best.get(point.kind, 0.0), predicted(point, constants))
        best[point.kind] = value
        out.append(value)
    return out


def calibrate(points: Sequence[Point], defaults: Mapping[str, float], *, setting: dict[str, Any],
              trial: str | None = None, source: str | None = None) -> Calibration:  # fmt: skip
    """Fit the points and record how well the model did before and after."""
    if not points:
        raise BadInput(msg("cal_no_points", None, trial=trial or "?"))
    constants, fitted = fit(points, defaults)
    before = cumulative_predictions(points, defaults)
    after = cumulative_predictions(points, constants)
    rows = [
        {
            "phase": p.phase,
            "kind": p.kind,
            "measured_mib": round(p.measured_mib, 1),
            "before_mib": round(b, 1),
            "after_mib": round(a, 1),
        }  # fmt: skip
        for p, b, a in zip(points, before, after, strict=True)
    ]
    rounded = {k: round(v, 4) for k, v in constants.items()}
    return Calibration(
        setting=setting, constants=rounded, fitted=fitted, trial=trial, source=source, points=rows
    )


def default_constants() -> dict[str, float]:
    """The uncalibrated values: factor 1, the fixed-shape reserve's low end, the CUDA context's low end."""
    from oomdoctor.estimate.memory import constants

    k = constants()
    return {
        "activation_scale": float(k.get("activation_scale", 1.0)),
        "eval_activation_scale": float(k.get("eval_activation_scale", k.get("activation_scale", 1.0))),
        "reserve_factor": float(k["fixed_shape_reserve"][0]),
        "context_mib": float(k["cuda_context_mib"][0]),
        "variable_length_creep": float(k["variable_length_creep"]),
    }


# --- From a probe's folder -------------------------------------------------------------------------------------


def probe_points(record: Mapping[str, Any], phases: Mapping[str, tuple[float, float]]) -> list[Point]:
    """The measured points of a probe's milestones (result.json), in the order they happened."""
    marks = {m.get("name"): m for m in record.get("milestones") or [] if m.get("passed")}
    points: list[Point] = []
    gpu = record.get("peak_source") == "nvml"

    def add(phase: str, kind: str, mib: Any) -> None:
        if isinstance(mib, int | float) and mib > 0:
            static, per_token = phases[phase]
            points.append(Point(phase, kind, float(mib), static, per_token))

    for name, phase in (("load", "load"), ("longest_batch", "train"), ("eval", "eval")):
        mark = marks.get(name)
        if mark is None:
            continue
        if gpu:
            if phase != "load":
                add(phase, "allocated", (mark.get("vram_allocated_gib") or 0) * MIB_PER_GIB)
                add(phase, "reserved", (mark.get("vram_reserved_gib") or 0) * MIB_PER_GIB)
        else:
            add(phase, "rss", mark.get("rss_hwm_mib") or mark.get("peak_mib"))
    if gpu and isinstance(record.get("peak_memory_mib"), int | float):
        last = "eval" if "eval" in marks else "train"
        add(last, "nvidia-smi", record["peak_memory_mib"])
    return points


def calibrate_trial(folder: str | os.PathLike[str], *, store: bool = True) -> Calibration:
    """Fit the constants to a finished probe trial, write ``calibration.json`` into it and the user cache.

    BadInput when the folder is not a trial, its config or model cannot be read, or it measured nothing usable.
    """
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.model import read_model
    from oomdoctor.trial.folder import TrialFolder

    files = TrialFolder.at(folder)
    try:
        record = json.loads(files.result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise BadInput(msg("cmp_not_a_trial", None, path=files.path)) from None
    config = read_config(files.config)
    model = read_model(config)
    data = probe_lengths(record)
    phases = split_phases(config, model, data)
    card = record.get("gpu_name") if record.get("peak_source") == "nvml" else None
    calibration = calibrate(probe_points(record, phases), default_constants(),
                            setting=setting_of(config, card), trial=str(files.path.resolve()),
                            source=record.get("peak_source"))  # fmt: skip
    if store:
        save(calibration, files.calibration)
    return calibration


def probe_lengths(record: Mapping[str, Any]) -> DataFacts | None:
    """The lengths the probe measured (longest train and eval sample), as the estimator takes them."""
    probe = record.get("probe") or {}
    longest = probe.get("longest_tokens")
    if not isinstance(longest, int) or longest <= 0:
        return None
    return DataFacts(source="probe", max_tokens=longest, eval_max_tokens=probe.get("eval_longest_tokens"))
