"""Facts the engine computes from the others before any rule runs (``derived.<name>`` in rule files).

They exist where a plain fact path is not enough: a user's answer overrides what the log says, the log
and the config may each hold the batch size, and "another process" must not count the failing process
when a container shows it under its host pid. Rule files may only name the keys in ``DERIVED_FACTS``.
"""

from __future__ import annotations

import math
from typing import Any

from oomdoctor.facts.types import GpuDevice
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.questions import yes_no

# name -> what it means (the loader rejects any other derived.<name> in a rule file).
DERIVED_FACTS: dict[str, str] = {
    "oom": "the run ran out of memory: the log says so (or ends inside a cut traceback), or there is no log "
    "(the user came with an OOM), or the user answered the phase",
    "phase": "where memory ran out: answers.phase, else the log's phase, else load when the weights never "
    "loaded, else unknown",
    "phase_source": "answer / log / weights_loaded / config / none",
    "weights_loaded": "the weights finished loading: answers.weights_loaded, else the log (None: unknown)",
    "memory_kind": "gpu (the memory the training step computes in: the GPU's, or PyTorch's CPU allocator "
    "inside a step of a CPU-only run) or host (system RAM: Killed, mmap, MemoryError): answers.memory_kind, "
    "else the log",
    "card_bf16": "the training card computes in bf16: answers.card_bf16, else NVML's compute capability",
    "card_name": "the card's name from NVML (None when unknown)",
    "world_size": "GPUs taking part: the log's world size, else at least the highest rank in the log + 1, "
    "else the config's",
    "micro_batch": "per-device train batch: the config's, else the log's 'Instantaneous batch size'",
    "accumulation": "gradient accumulation steps: the config's, else the log's",
    "effective_batch": "micro_batch x accumulation x world_size",
    "eval_batch": "per-device eval batch in effect (LLaMA-Factory's default 8 when unset)",
    "eval_batch_default": "True when per_device_eval_batch_size is not in the config (the default 8 applies)",
    "self_listed_pid": "a 'Process N has X in use' entry that is the failing process itself (containers list "
    "it under its host pid); None when none matched",
    "other_process_mib": "memory that other processes held on the failing card (log lines, else NVML)",
    "other_process_share": "other_process_mib / the card's capacity",
    "other_process_pids": "pids of those processes",
    "model_size_mib": "the weights in 16-bit (the estimator's weights term, else parameters x 2 bytes)",
    "host_ram_needed_mib": "model_size_mib x processes that each load it (world_size)",
    "padded_longest_tokens": "the longest sample as it is padded in a batch: min(longest, cutoff_len) "
    "rounded up to 8",
    "cutoff_candidate": "a lower cutoff_len worth proposing, always below both the longest sample and "
    "cutoff_len: the 99th percentile length rounded up to 8 (keeps 99% of samples whole), else the longest "
    "multiple of 256 the estimate says fits the card; None without real lengths",
    "cutoff_candidate_source": "p99 / estimate",
    "cutoff_candidate_truncated": "samples cutoff_candidate would cut, when the lengths were counted at that "
    "cutoff (None: not counted)",
    "reserve_would_fit": "free + reserved-but-unallocated >= the request: the memory was there, in pieces",
}

# How the log's OOM kind maps to the memory that ran out, when the log reader does not say (ran_out_of).
MEMORY_KIND_BY_OOM_KIND: dict[str, str] = {
    "cuda_oom": "gpu",
    "cuda_error": "gpu",
    "deepspeed": "gpu",
    "bnb": "gpu",
    "no_executable_batch": "gpu",
    "cpu_alloc": "gpu",
    "killed": "host",
    "mmap": "host",
    "python_memory": "host",
}
# PyTorch's CPU tensor allocator failing inside a forward or backward pass means the step computes on the
# CPU (a GPU run keeps those tensors on the GPU): on such a run it is the memory a smaller batch relieves,
# so the training nodes treat it as the device's memory ("gpu"), whatever else the log reader reports.
COMPUTE_ALLOCATOR_KINDS: frozenset[str] = frozenset({"cpu_alloc"})
COMPUTE_PHASES: frozenset[str] = frozenset({"first_batch", "long_sample", "eval"})

# A container may show the failing process as "Process N has X in use" (its host pid). Its own use is
# PyTorch's reserved memory plus the CUDA context, which is at most this much (older CUDA: about 1.3 GiB).
CUDA_CONTEXT_MAX_MIB = 1536.0
# An NVML device is the card from the log when their sizes agree within this fraction.
SAME_CARD_TOLERANCE = 0.02
BYTES_PER_PARAM_16BIT = 2
MIB = 1024 * 1024
PAD_MULTIPLE = 8  # LLaMA-Factory pads each batch to its longest sample, rounded up to a multiple of 8
CUTOFF_STEP = 256  # cutoffs tried against the estimate: multiples of this, from the longest sample down


def _round_up(value: int, multiple: int = PAD_MULTIPLE) -> int:
    return int(math.ceil(value / multiple) * multiple)


def log_failed(facts: Facts) -> bool:
    """The log shows the run failing for memory, or a traceback cut before its error line (a pasted
    excerpt): the user brought it as an OOM, so it is treated as one, with the memory kind asked."""
    log = facts.log
    return log is not None and (log.oom or (log.traceback_cut and not log.other_error))


def _phase(facts: Facts, weights_loaded: bool | None) -> tuple[str, str]:
    answered = facts.answers.get("phase")
    if answered:
        return answered, "answer"
    log = facts.log
    if log is not None and log_failed(facts) and log.phase not in ("unknown", "none"):
        return log.phase, "log"
    if weights_loaded is False:
        return "load", "weights_loaded"
    config = facts.config
    if config is not None and config.evaluation_only and log_failed(facts) and weights_loaded is not False:
        return "eval", "config"  # nothing but evaluation runs after the weights load
    return "unknown", "none"


def _memory_kind(facts: Facts, phase: str) -> str | None:
    answered = facts.answers.get("memory_kind")
    if answered:
        return answered
    log = facts.log
    kind = log.oom_kind if log is not None else None
    if kind in COMPUTE_ALLOCATOR_KINDS and phase in COMPUTE_PHASES:
        return "gpu"
    if log is not None and log.ran_out_of in ("gpu", "host"):
        return log.ran_out_of
    if kind is None:
        return None
    if kind in COMPUTE_ALLOCATOR_KINDS and phase == "load":
        return "host"
    return MEMORY_KIND_BY_OOM_KIND.get(kind)


def _failing_device(facts: Facts) -> GpuDevice | None:
    """The NVML device that is the card from the log (same index and size), or the only one."""
    gpu = facts.gpu
    if gpu is None or not gpu.available or not gpu.devices:
        return None
    log = facts.log
    candidates = gpu.devices
    if log is not None and log.gpu_index is not None:
        candidates = [d for d in candidates if d.index == log.gpu_index]
    elif len(candidates) > 1:
        return None
    if not candidates:
        return None
    device = candidates[0]
    capacity = log.capacity_mib if log is not None else None
    if capacity and abs(device.total_mib - capacity) > SAME_CARD_TOLERANCE * capacity:
        return None
    return device


def _card_bf16(facts: Facts) -> bool | None:
    answered = yes_no(facts.answers.get("card_bf16"))
    if answered is not None:
        return answered
    gpu = facts.gpu
    if gpu is None or not gpu.available or not gpu.devices:
        return None
    device = _failing_device(facts) or gpu.devices[0]
    if device.bf16_supported is not None:
        return device.bf16_supported
    if device.compute_capability is not None:
        from oomdoctor.facts.gpu import supports_bf16

        return supports_bf16(device.compute_capability)
    return None


def _other_processes(facts: Facts) -> tuple[float | None, list[int], int | None]:
    """(MiB other processes held, their pids, the pid that is the failing process itself)."""
    log = facts.log
    if log is not None and log.other_processes:
        listed = list(log.other_processes)
        self_pid = None
        if log.process_in_use_mib is None:
            own = log.reserved_mib
            if own is None and log.allocated_mib is not None:
                own = log.allocated_mib + (log.reserved_unallocated_mib or 0.0)
            if own is not None:
                matches = [p for p in listed if own - 1.0 <= p.used_mib <= own + CUDA_CONTEXT_MAX_MIB]
                if matches:
                    mine = min(matches, key=lambda p: abs(p.used_mib - own))
                    self_pid = mine.pid
                    listed = [p for p in listed if p is not mine]
        return sum(p.used_mib for p in listed), [p.pid for p in listed], self_pid
    if log is not None and log.oom:
        device = _failing_device(facts)
        if device is not None and device.processes:
            used = [p for p in device.processes if p.used_mib]
            return sum(p.used_mib or 0.0 for p in used), [p.pid for p in used], None
    return None, [], None


def _world_size(facts: Facts) -> int | None:
    """GPUs taking part: the log's banner, else at least one more than the highest rank the log shows
    (``[rank2]:`` means three or more processes), else the config's."""
    log, config = facts.log, facts.config
    if log is not None and log.world_size:
        return log.world_size
    if log is not None and log.rank:
        return max(log.rank + 1, config.world_size if config else 1)
    return config.world_size if config else None


def _model_size_mib(facts: Facts) -> float | None:
    if facts.estimate is not None and facts.estimate.terms.get("weights"):
        return float(facts.estimate.terms["weights"])
    if facts.model is not None and facts.model.params:
        return facts.model.params * BYTES_PER_PARAM_16BIT / MIB
    return None


def _cutoff_that_fits(facts: Facts, limit: int) -> int | None:
    """The longest cutoff below ``limit`` (a multiple of CUTOFF_STEP) that the estimate says fits the card."""
    config, model = facts.config, facts.model
    if config is None or model is None or facts.estimate is None or not facts.gpu_total_mib:
        return None
    try:
        from oomdoctor.estimate import estimate, with_changes  # type: ignore[attr-defined]
    except ImportError:
        return None
    cutoff = (limit - 1) // CUTOFF_STEP * CUTOFF_STEP
    while cutoff >= CUTOFF_STEP:
        trial = with_changes(config, {"cutoff_len": cutoff})
        if estimate(trial, model, data=facts.data, gpu_total_mib=facts.gpu_total_mib).fits:
            return cutoff
        cutoff -= CUTOFF_STEP
    return None


def _cutoff_candidate(facts: Facts) -> tuple[int | None, str | None, int | None]:
    """(cutoff to propose, where it came from, samples it cuts when counted)."""
    config, data = facts.config, facts.data
    if config is None or data is None or not data.max_tokens:
        return None, None, None
    limit = min(data.max_tokens, config.cutoff_len)
    candidate, source = None, None
    if data.p99_tokens and _round_up(data.p99_tokens) < limit:
        candidate, source = _round_up(data.p99_tokens), "p99"
    else:
        fitting = _cutoff_that_fits(facts, limit)
        if fitting is not None:
            candidate, source = fitting, "estimate"
    truncated = data.truncated if candidate is not None and data.cutoff_len == candidate else None
    return candidate, source, truncated


def derive(facts: Facts, reuse: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compute every ``derived.<name>`` in ``DERIVED_FACTS`` from the facts and the user's answers.

    ``reuse``: an earlier result for the same files (only the answers differ), whose costly answers
    (the cutoff search) are kept.
    """
    config, log, data = facts.config, facts.log, facts.data
    weights_loaded = yes_no(facts.answers.get("weights_loaded"))
    if weights_loaded is None and log is not None:
        weights_loaded = log.weights_loaded
    phase, phase_source = _phase(facts, weights_loaded)
    if phase in ("first_batch", "long_sample", "eval", "save", "optimizer_step") and weights_loaded is None:
        weights_loaded = True
    oom = log is None or log_failed(facts) or "phase" in facts.answers

    world_size = _world_size(facts)
    micro_batch = (
        config.per_device_train_batch_size if config else (log.instantaneous_batch_size if log else None)
    )
    accumulation = (
        config.gradient_accumulation_steps if config else (log.gradient_accumulation_steps if log else None)
    )
    effective = micro_batch * accumulation * (world_size or 1) if micro_batch and accumulation else None
    if effective is None and log is not None:
        effective = log.total_train_batch_size

    other_mib, other_pids, self_pid = _other_processes(facts)
    capacity = (log.capacity_mib if log is not None else None) or facts.gpu_total_mib
    share = other_mib / capacity if other_mib is not None and capacity else None

    model_size = _model_size_mib(facts)
    device = _failing_device(facts)

    padded = None
    if data is not None and data.max_tokens:
        padded = _round_up(min(data.max_tokens, config.cutoff_len) if config else data.max_tokens)
    if reuse is not None:
        cutoff = (
            reuse["cutoff_candidate"],
            reuse["cutoff_candidate_source"],
            reuse["cutoff_candidate_truncated"],
        )
    else:
        cutoff = _cutoff_candidate(facts)

    reserve_fits = None
    if log is not None and log.requested_mib is not None and log.free_mib is not None:
        reserve_fits = log.free_mib + (log.reserved_unallocated_mib or 0.0) >= log.requested_mib

    return {
        "oom": oom,
        "phase": phase,
        "phase_source": phase_source,
        "weights_loaded": weights_loaded,
        "memory_kind": _memory_kind(facts, phase),
        "card_bf16": _card_bf16(facts),
        "card_name": device.name if device is not None else None,
        "world_size": world_size,
        "micro_batch": micro_batch,
        "accumulation": accumulation,
        "effective_batch": effective,
        "eval_batch": config.per_device_eval_batch_size if config else None,
        "eval_batch_default": (not config.per_device_eval_batch_size_set) if config else None,
        "self_listed_pid": self_pid,
        "other_process_mib": other_mib,
        "other_process_share": share,
        "other_process_pids": other_pids,
        "model_size_mib": model_size,
        "host_ram_needed_mib": model_size * (world_size or 1) if model_size is not None else None,
        "padded_longest_tokens": padded,
        "cutoff_candidate": cutoff[0],
        "cutoff_candidate_source": cutoff[1],
        "cutoff_candidate_truncated": cutoff[2],
        "reserve_would_fit": reserve_fits,
    }
