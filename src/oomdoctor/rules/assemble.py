"""The one step that settles the facts several readers speak to, and hands back one frozen bundle.

The readers each say what they saw: the config its batch and schedule, the log its banner, ranks and the
card's capacity, NVML its devices, the user a flag or an answer. Where two of them could answer the same
question (how big is the card? how many processes? how many samples per update? which phase?), this module
alone decides, once, in a stated order; the rules, the estimate, the reports and the TUI read the answer
from ``Facts.derived`` and never work it out again.

    card size      --gpu-mib  >  the log's total capacity (the card that ran out)  >  NVML's first GPU
                   >  the user's answer (card_gb)
    world size     given  >  LLaMA-Factory's "world size:"  >  a launcher line (torchrun/deepspeed/accelerate
                   arguments, WORLD_SIZE)  >  Ray's ray_num_workers  >  banner total / (batch x acc)
                   >  WORLD_SIZE  >  a config built with one  >  the user's answer (world_size)  >  1 when
                   nothing shows several processes; unknown when a rank or GPU number proves several (it is
                   only ``processes_at_least``)
    effective batch  the config's batch x accumulation x that world size (unknown with it), else the
                   log's banner total

Pure: no file, device or clock is read here; the same readings and answers give the same Facts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from oomdoctor import records
from oomdoctor.errors import BadInput
from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.types import ConfigFacts, DataFacts, LogFacts, ModelFacts
from oomdoctor.rules.derive import derive
from oomdoctor.rules.facts import Derived, Facts, Readings
from oomdoctor.rules.questions import answered_card_mib, answered_world_size

__all__ = ["assemble", "facts_of", "settle_capacity", "settle_world_size", "sharded_by", "phase_candidates"]

# Frames only FSDP runs go through (un-sharding, all-gathering flat parameters): a traceback through one
# of them is a sharded run, whatever the config excerpt shows.
FSDP_FRAMES: frozenset[str] = frozenset(
    {
        "_alloc_padded_unsharded_flat_param",
        "_unshard_fsdp_state_params",
        "_pre_forward_unshard",
        "_unshard",
        "_use_unsharded_views",
        "foreach_all_gather",
        "_fsdp_root_pre_forward",
    }
)


def assemble(
    readings: Readings,
    answers: Mapping[str, str] | None = None,
    *,
    reuse: Derived | None = None,
    reuse_estimate: Estimate | None = None,
) -> Facts:
    """Settle the readings into one bundle: the run's size first (card, world size, batch, phase
    candidates), then the estimate on that size, then what depends on the answers.

    ``reuse``, ``reuse_estimate``: the Derived and the estimate of an earlier assembly of the same readings
    (only the answers differ), kept with their costly parts (the estimate, the cutoff search) while the
    answers leave the run's size as it was (a card_gb answer sizes the card: then both are made again).
    """
    config, log = readings.config, readings.log
    answers = answers or {}
    capacity, capacity_source = settle_capacity(readings, answers)
    world_size, world_source = settle_world_size(readings, answers)
    if config is not None and config.world_size != (world_size or 1):
        config = records.replace(config, world_size=world_size or 1)
    micro_batch, accumulation, effective_batch = _batch(config, log, world_size)
    sharding = sharded_by(config, log, readings.env)
    settled = Derived(
        capacity_mib=capacity,
        capacity_source=capacity_source,
        world_size=world_size,
        world_size_source=world_source,
        processes_at_least=_processes_at_least(log, world_size, world_source),
        sharded_by=sharding,
        world_size_open=world_size_open(sharding, world_source),
        phase_candidates=phase_candidates(config, log),
        micro_batch=micro_batch,
        accumulation=accumulation,
        effective_batch=effective_batch,
    )
    if reuse is not None and (reuse.capacity_mib, reuse.world_size) != (capacity, world_size):
        reuse, reuse_estimate = None, None  # an answer sized the run anew
    estimate = readings.estimate if readings.estimate is not None else reuse_estimate
    if estimate is None:
        estimate = _estimate(config, readings.model, readings.data, capacity)
    draft = Facts(
        readings=readings,
        config=config,
        log=log,
        gpu=readings.gpu,
        model=readings.model,
        data=readings.data,
        estimate=estimate,
        answers=dict(answers),
        env=readings.env,
        derived=settled,
    )
    return records.replace(draft, derived=derive(draft, reuse=reuse))


def facts_of(*, answers: Mapping[str, str] | None = None, **readings: Any) -> Facts:
    """``assemble(Readings(**readings), answers)``: the short form tests and case files use."""
    return assemble(Readings(**readings), answers)


# --- the card ------------------------------------------------------------------------------------------


def settle_capacity(
    readings: Readings, answers: Mapping[str, str] | None = None
) -> tuple[float | None, str | None]:
    """(the card's MiB, where it comes from): the user's flag, else the card that ran out, else NVML's, else
    the user's answer to the card size question (what no file said)."""
    if readings.capacity_mib:
        return float(readings.capacity_mib), "flag"
    log, gpu = readings.log, readings.gpu
    if log is not None and log.capacity_mib:
        return log.capacity_mib, "log"
    if gpu is not None and gpu.first is not None and gpu.first.total_mib:
        return gpu.first.total_mib, "nvml"
    answered = answered_card_mib(answers or {})
    return (answered, "answer") if answered is not None else (None, None)


# --- the run's size ------------------------------------------------------------------------------------


def settle_world_size(
    readings: Readings, answers: Mapping[str, str] | None = None
) -> tuple[int | None, str | None]:
    """(processes taking part, where that is stated); see the module's order. A rank number seen in an
    excerpt states no world size (``[rank3]`` may be one of 4 or of 64); the user's answer comes after every
    file."""
    config, log = readings.config, readings.log
    stated: list[tuple[int | None, str]] = [
        (readings.world_size, "given"),
        (log.world_size if log is not None else None, "log"),
        (log.launcher_world_size if log is not None else None, "launcher"),
        (_ray_workers(config, readings.env), "ray"),
        (_banner_world(log), "banner"),
        (_int_or_none(readings.env.get("WORLD_SIZE")), "env"),
        (config.world_size if config is not None and config.world_size > 1 else None, "config"),
        (answered_world_size(answers or {}, _numbered_processes(log)), "answer"),
    ]
    for value, source in stated:
        if value is not None and value > 0:
            return value, source
    if config is None or _numbered_processes(log) > 1:
        return None, None  # several processes, as a rank or GPU number proves, but how many is unsaid
    return 1, "single"


def world_size_open(sharding: str, world_source: str | None) -> bool:
    """``Derived.world_size_open``: the run shards its state (``sharded_by`` not none) and nothing states how
    many processes share it (a rank number only bounds them)."""
    return sharding != "none" and world_source in (None, "single")


def _banner_world(log: LogFacts | None) -> int | None:
    """The Trainer's banner: Total train batch size = batch x accumulation x processes."""
    if log is None:
        return None
    per_process = (log.instantaneous_batch_size or 0) * (log.gradient_accumulation_steps or 0)
    total = log.total_train_batch_size
    if per_process and total and total % per_process == 0:
        return total // per_process
    return None


# Ray Train is switched on by USE_RAY=1 in the training's environment (LLaMA-Factory 0.9.5, hparams/parser.py);
# a config that names its Ray settings is a Ray run too.
RAY_KEYS: tuple[str, ...] = ("ray_run_name", "ray_num_workers", "ray_storage_path", "resources_per_worker")


def uses_ray(config: ConfigFacts | None, env: Mapping[str, str]) -> bool:
    from oomdoctor.facts.config import written

    if str(env.get("USE_RAY", "")).strip().lower() in ("1", "true", "yes"):
        return True
    return config is not None and any(written(config, key) for key in RAY_KEYS)


def _ray_workers(config: ConfigFacts | None, env: Mapping[str, str]) -> int | None:
    from oomdoctor.facts.config import setting

    if config is None or not uses_ray(config, env):
        return None
    return _int_or_none(setting(config, "ray_num_workers"))


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value).strip()) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and number > 0 else None


def _numbered_processes(log: LogFacts | None) -> int:
    """The processes a number in the log proves: ``[rank3]`` is one of four or more, and an OOM on
    ``GPU 5`` is local rank 5 (LLaMA-Factory launches one process per visible card, each on
    ``cuda:<local rank>``); 1 when the log numbers none."""
    if log is None:
        return 1
    return max([1] + [n + 1 for n in (log.rank, log.gpu_index) if n is not None])


def _processes_at_least(log: LogFacts | None, world_size: int | None, source: str | None) -> int | None:
    """The stated world size (a rank past it would contradict it), else what the log's numbers prove."""
    if world_size is not None and source != "single":
        rank = log.rank if log is not None else None
        return max(world_size, rank + 1) if rank is not None else world_size
    if log is None:
        return world_size
    return _numbered_processes(log)


def sharded_by(config: ConfigFacts | None, log: LogFacts | None, env: Mapping[str, str]) -> str:
    """deepspeed / fsdp / ray: what spreads the run over its processes; "none": nothing the readings show
    (plain data parallelism, or one process). A known value, never None, so a rule can test it."""
    from oomdoctor.facts.config import setting

    if config is not None and (config.zero_stage is not None or config.deepspeed):
        return "deepspeed"
    if log is not None and (log.zero_stage is not None or log.oom_kind == "deepspeed"):
        return "deepspeed"
    if config is not None and (setting(config, "fsdp") or setting(config, "fsdp_config")):
        return "fsdp"
    if log is not None and (log.fsdp_seen or FSDP_FRAMES.intersection(log.frames)):
        return "fsdp"
    if uses_ray(config, env):
        return "ray"
    return "none"


def _batch(
    config: ConfigFacts | None, log: LogFacts | None, world_size: int | None
) -> tuple[int | None, int | None, int | None]:
    """micro_batch, accumulation, effective_batch: the config's (with the settled world size), else the
    log's banner (its own total, else batch x accumulation x a stated world size)."""
    if config is not None:
        effective = config.effective_batch if world_size is not None else None
        return config.per_device_train_batch_size, config.gradient_accumulation_steps, effective
    if log is None:
        return None, None, None
    micro, accumulation = log.instantaneous_batch_size, log.gradient_accumulation_steps
    effective = log.total_train_batch_size
    if effective is None and micro and accumulation and world_size:
        effective = micro * accumulation * world_size
    return micro, accumulation, effective


# --- the phase's candidates ------------------------------------------------------------------------------


def phase_candidates(config: ConfigFacts | None, log: LogFacts | None) -> tuple[str, ...]:
    """The phases the log leaves open (evaluation or save after a step hook) that the config's schedule
    can run at that step; all of the log's when there is no config to rule one out."""
    if log is None or not log.phase_candidates:
        return ()
    if config is None:
        return tuple(log.phase_candidates)
    return tuple(p for p in log.phase_candidates if _runs_at(config, p, log.step))


def _runs_at(config: ConfigFacts, phase: str, step: int | None) -> bool:
    """Whether the Trainer's after-step hook can run ``phase`` (eval / save) after ``step`` with this config:
    False only when the config's schedule rules it out."""
    from oomdoctor.facts.config import setting

    if phase == "eval":
        if not config.do_eval:
            return False
        every = config.eval_steps if config.eval_strategy == "steps" else None
    else:
        strategy = str(setting(config, "save_strategy") or "steps").lower()
        if strategy == "no":
            return False
        every = (config.save_steps or setting(config, "save_steps")) if strategy == "steps" else None
    if isinstance(every, int) and not isinstance(every, bool) and every > 0 and step:
        return step % every == 0
    return True  # epoch strategies, ratios, an unknown step: cannot be ruled out


# --- the estimate on the settled size --------------------------------------------------------------------


def _estimate(
    config: ConfigFacts | None, model: ModelFacts | None, data: DataFacts | None, capacity: float | None
) -> Estimate | None:
    """The estimator's view of this config on this card; None when the model's shape does not allow one
    (the estimate is an optional fact: a model known only in part diagnoses without it)."""
    if config is None or model is None or not model.hidden_size:
        return None
    from oomdoctor.estimate import estimate

    with contextlib.suppress(BadInput):
        return estimate(config, model, data=data, gpu_total_mib=capacity)
    return None
