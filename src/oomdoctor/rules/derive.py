"""Facts the engine computes from the others before any rule runs (``derived.<name>`` in rule files).

They exist where a plain fact path is not enough: a user's answer overrides what the log says, the log
and the config may each hold the batch size, and "another process" must not count the failing process
when a container shows it under its host pid. Rule files may only name the keys in ``DERIVED_FACTS``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from oomdoctor.facts.account import account_of, fragmentation_is_real
from oomdoctor.facts.logits import logits_frame, request_is_logits
from oomdoctor.facts.types import ConfigFacts, GpuDevice, LogFacts
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.questions import yes_no

# name -> what it means (the loader rejects any other derived.<name> in a rule file).
DERIVED_FACTS: dict[str, str] = {
    "oom": "the run ran out of memory: the log says so (or ends inside a cut traceback), or there is no log "
    "(the user came with an OOM), or the user answered the phase",
    "phase": "where memory ran out: answers.phase, else the log's phase, else load when the weights never "
    "loaded, else unknown",
    "phase_source": "answer / log / schedule (the log narrows it to evaluation or save, the config's "
    "eval/save schedule at that step picks one) / weights_loaded / config / none",
    "weights_loaded": "the weights finished loading: answers.weights_loaded, else the log (None: unknown)",
    "memory_kind": "gpu (the memory the training step computes in: the GPU's, or PyTorch's CPU allocator "
    "inside a step of a CPU-only run) or host (system RAM: Killed, mmap, MemoryError): answers.memory_kind, "
    "else the log; a traceback cut before its error line is a Python exception, read as the GPU's",
    "memory_kind_source": "answer / log / traceback (a cut traceback whose phase or frames can only mean the "
    "GPU) / assumed (a cut traceback while loading or saving: gpu is likely, the question stays open)",
    "card_bf16": "the training card computes in bf16: answers.card_bf16, else NVML's compute capability, "
    "else the card's name (NVML's or the log's) in the card table",
    "card_name": "the card's name from NVML, else from the log (None when unknown)",
    "zero_stage": "the DeepSpeed ZeRO stage in use: the config's (its DeepSpeed JSON), else the log's (a "
    "traceback through ZeRO's stage files, its optimizer banner or config dump); None: not known to be on",
    "world_size": "GPUs taking part: the log's world size, else the largest lower bound the log gives (highest "
    "rank + 1, the failing 'GPU N' + 1, Total train batch size / (batch x accumulation)) and the config's",
    "finetuning_type": "what is trained: the config's finetuning_type when it names one; else full when the "
    "log shows it (trainable parameters are most of the model, or the optimizer step asked for more than "
    "adapters ever hold); else LLaMA-Factory's default (lora)",
    "micro_batch": "per-device train batch: the config's, else the log's 'Instantaneous batch size'",
    "accumulation": "gradient accumulation steps: the config's, else the log's",
    "effective_batch": "micro_batch x accumulation x world_size",
    "eval_batch": "per-device eval batch in effect (LLaMA-Factory's default 8 when unset; a benchmark run of "
    "`llamafactory-cli eval` (task:) uses batch_size instead)",
    "eval_batch_default": "True when per_device_eval_batch_size is not in the config (the default 8 applies)",
    "self_listed_pid": "a 'Process N has X in use' entry that is the failing process itself (containers list "
    "it under its host pid); None when none matched",
    "other_process_mib": "memory that other processes held on the failing card (log lines, else NVML)",
    "other_process_share": "other_process_mib / the card's capacity",
    "other_process_pids": "pids of those processes",
    "model_size_mib": "the weights in 16-bit (the estimator's weights term, else parameters x 2 bytes)",
    "weights_share": "the weights' share of the card: model_size_mib / capacity, or, when it ran out while "
    "loading, what PyTorch had allocated by then (that is weights) / capacity, whichever is larger; None "
    "when neither is known",
    "host_ram_needed_mib": "model_size_mib x processes that each load it (world_size)",
    "padded_longest_tokens": "the longest sample as it is padded in a batch: min(longest, cutoff_len) "
    "rounded up to 8",
    "cutoff_candidate": "a lower cutoff_len worth proposing, always below both the longest sample and "
    "cutoff_len: the 99th percentile length rounded up to 8 (keeps 99% of samples whole), else the longest "
    "multiple of 256 the estimate says fits the card; None without real lengths",
    "cutoff_candidate_source": "p99 / estimate",
    "cutoff_candidate_truncated": "samples cutoff_candidate would cut, when the lengths were counted at that "
    "cutoff (None: not counted)",
    "reserve_would_fit": "the unused reserve is a real share of the card (facts/account.py) and, with what was "
    "free, would have served the request had it been in one piece: the memory was there, in pieces",
    "logits_evidence": "frame (a function over the full-vocabulary logits among the failure's innermost frames) / "
    "size (the request is micro-batch x padded length x vocabulary x 4 or 2 bytes, x2 for DPO/KTO pairs) / None",
    "dominant_cause": "what the failing step's biggest term is: logits when logits_evidence says so, else the "
    "estimate's dominant term (logits / activations / weights / optimizer_state); None when neither tells",
    "other_process_whose": "whose the memory outside this run is: stranger (another job), unclear (a listed "
    "process that may be this run's own: another rank, its vLLM engine, this notebook's kernel), None: none",
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

# An NVML device is the card from the log when their sizes agree within this fraction.
SAME_CARD_TOLERANCE = 0.02
BYTES_PER_PARAM_16BIT = 2
MIB = 1024 * 1024
PAD_MULTIPLE = 8  # LLaMA-Factory pads each batch to its longest sample, rounded up to a multiple of 8
CUTOFF_STEP = 256  # cutoffs tried against the estimate: multiples of this, from the longest sample down

# A traceback cut before its error line is a Python exception. Inside a training or evaluation step that is
# the device's memory: system RAM running out in a step ends with a bare "Killed", and PyTorch's CPU
# allocator failing in a step is the compute memory of a CPU-only run (see COMPUTE_ALLOCATOR_KINDS).
TRACEBACK_GPU_PHASES: frozenset[str] = frozenset({"first_batch", "long_sample", "eval", "optimizer_step"})
# Frames that only ever allocate on the device: FSDP un-sharding a flat parameter, DeepSpeed gathering ZeRO-3
# shards, accelerate placing weights on a card. A cut traceback through one of them is the GPU's memory in
# any phase; through none of them, loading and saving could also have run out of system RAM.
DEVICE_ALLOCATION_FRAMES: frozenset[str] = frozenset(
    {
        "_alloc_padded_unsharded_flat_param",
        "_unshard_fsdp_state_params",
        "_zero3_consolidated_16bit_state_dict",
        "_allgather_params",
        "set_module_tensor_to_device",
        "dispatch_model",
    }
)
# Full fine-tuning shows in the log when the trainable parameters are at least this share of the model...
FULL_TRAINABLE_SHARE = 0.5
# ... or when the optimizer step asks for at least this much at once: Adam's temporaries are as large as one
# trained tensor (or one ZeRO partition of them), and LoRA adapters of any usual rank are far smaller.
ADAPTER_OPTIMIZER_REQUEST_MAX_MIB = 1024.0


def _round_up(value: int, multiple: int = PAD_MULTIPLE) -> int:
    return int(math.ceil(value / multiple) * multiple)


def log_failed(facts: Facts) -> bool:
    """The log shows the run failing for memory, or a traceback cut before its error line (a pasted
    excerpt): the user brought it as an OOM, so it is treated as one, with the memory kind asked."""
    log = facts.log
    return log is not None and (log.oom or (log.traceback_cut and not log.other_error))


def _runs_at(config: ConfigFacts, phase: str, step: int | None) -> bool:
    """Whether the Trainer's after-step hook can run ``phase`` (eval / save) after ``step`` with this config:
    False only when the config's schedule rules it out."""
    from oomdoctor.facts.config import lf_defaults

    if phase == "eval":
        if not config.do_eval:
            return False
        every = config.eval_steps if config.eval_strategy == "steps" else None
    else:
        strategy = str(
            config.raw.get("save_strategy") or lf_defaults().get("save_strategy") or "steps"
        ).lower()
        if strategy == "no":
            return False
        every = (config.save_steps or lf_defaults().get("save_steps")) if strategy == "steps" else None
    if isinstance(every, int) and not isinstance(every, bool) and every > 0 and step:
        return step % every == 0
    return True  # epoch strategies, ratios, an unknown step: cannot be ruled out


def _phase_by_schedule(facts: Facts) -> str | None:
    """The log narrowed the phase to candidates (a failure in the after-step hook: evaluation or save); the
    config's schedule at that step keeps one of them, or None when it keeps none or several."""
    log, config = facts.log, facts.config
    if log is None or config is None or not log.phase_candidates:
        return None
    possible = [p for p in log.phase_candidates if _runs_at(config, p, log.step)]
    return possible[0] if len(possible) == 1 else None


def _phase(facts: Facts, weights_loaded: bool | None) -> tuple[str, str]:
    answered = facts.answers.get("phase")
    if answered:
        return answered, "answer"
    log = facts.log
    if log is not None and log_failed(facts) and log.phase not in ("unknown", "none"):
        return log.phase, "log"
    if log is not None and log_failed(facts):
        scheduled = _phase_by_schedule(facts)
        if scheduled is not None:
            return scheduled, "schedule"
    if weights_loaded is False:
        return "load", "weights_loaded"
    config = facts.config
    if (
        config is not None
        and config.evaluation_only
        and log_failed(facts)
        and weights_loaded is not False
        and not _card_held_by_others(facts)
    ):
        return "eval", "config"  # nothing but evaluation runs after the weights load
    return "unknown", "none"


def _card_held_by_others(facts: Facts) -> bool:
    """The log lists other processes holding more of the card than the failing process itself: what filled
    the card is not this run's phase, so the config's run kind does not place the failure."""
    log = facts.log
    if log is None or not log.other_processes:
        return False
    other_mib, _, _ = _other_processes(facts)
    own = log.process_in_use_mib
    if own is None and log.allocated_mib is not None:
        own = log.allocated_mib + (log.reserved_unallocated_mib or 0.0)
    return other_mib is not None and own is not None and other_mib > own


def _memory_kind(facts: Facts, phase: str) -> tuple[str | None, str | None]:
    """(which memory ran out, where that comes from): see ``DERIVED_FACTS``."""
    answered = facts.answers.get("memory_kind")
    if answered:
        return answered, "answer"
    log = facts.log
    kind = log.oom_kind if log is not None else None
    if kind in COMPUTE_ALLOCATOR_KINDS and phase in COMPUTE_PHASES and log is not None and log.phase == phase:
        return "gpu", "log"  # the log itself placed the allocation in a step (not only the user's answer)
    if log is not None and log.ran_out_of in ("gpu", "host"):
        return log.ran_out_of, "log"
    if kind is not None:
        if kind in COMPUTE_ALLOCATOR_KINDS and phase == "load":
            return "host", "log"
        if kind in MEMORY_KIND_BY_OOM_KIND:
            return MEMORY_KIND_BY_OOM_KIND[kind], "log"
    if log is not None and log.traceback_cut and not log.other_error:
        if phase in TRACEBACK_GPU_PHASES or DEVICE_ALLOCATION_FRAMES.intersection(log.frames):
            return "gpu", "traceback"
        if phase in ("load", "save"):
            return "gpu", "assumed"
    # no log, only the user's word on where it stopped: which memory ran out is asked ("GPU or host memory?")
    # before any GPU-side change is proposed
    return None, None


def _weights_share(
    model_size: float | None, capacity: float | None, phase: str, log: LogFacts | None
) -> float | None:
    if not capacity:
        return None
    shares = [model_size / capacity] if model_size is not None else []
    if phase == "load" and log is not None and log.allocated_mib is not None:
        shares.append(log.allocated_mib / capacity)
    return max(shares) if shares else None


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


def _card_bf16(facts: Facts, card_name: str | None) -> bool | None:
    answered = yes_no(facts.answers.get("card_bf16"))
    if answered is not None:
        return answered
    gpu = facts.gpu
    if gpu is not None and gpu.available and gpu.devices:
        device = _failing_device(facts) or gpu.devices[0]
        if device.bf16_supported is not None:
            return device.bf16_supported
        if device.compute_capability is not None:
            from oomdoctor.facts.gpu import supports_bf16

            return supports_bf16(device.compute_capability)
    return bf16_of_card_name(card_name) if card_name else None


_MODEL_WORD = re.compile(r"[a-z]*\d+[a-z]*")  # "v100", "a100", "4090", "h20": the words that name a card
_SIZE_WORD = re.compile(r"\d+(gb|g)$")  # "32gb": a memory size, shared by many cards


def bf16_of_card_name(name: str) -> bool | None:
    """Whether a card computes in bf16, from its name ("Tesla V100-SXM2-32GB", "V100", "RTX 4090") and the
    estimator's card table; None when the table does not know it or its matches disagree."""
    from oomdoctor.errors import BadInput
    from oomdoctor.estimate.cards import card_by_name, card_names

    try:
        return card_by_name(name).bf16
    except BadInput:
        pass
    wanted = {w for w in _MODEL_WORD.findall(name.lower()) if not _SIZE_WORD.match(w)}
    if not wanted:
        return None
    verdicts = {
        card_by_name(known).bf16 for known in card_names() if wanted & set(_MODEL_WORD.findall(known.lower()))
    }
    return verdicts.pop() if len(verdicts) == 1 else None


def _other_processes(facts: Facts) -> tuple[float | None, list[int], int | None]:
    """(MiB other processes held, their pids, the pid that is the failing process itself): from the OOM
    message read as an account of the card (facts/account.py), else NVML's processes on the failing card."""
    log = facts.log
    acc = account_of(log)
    if acc is not None and (acc.listed or acc.self_pid is not None):
        return acc.listed_mib, [p.pid for p in acc.listed], acc.self_pid
    if acc is not None and acc.stranger_mib > 0:
        return acc.stranger_mib, [], None  # no process list: what lies outside this run's reserve
    if log is not None and log.other_processes:
        return sum(p.used_mib for p in log.other_processes), [p.pid for p in log.other_processes], None
    if log is not None and log.oom:
        device = _failing_device(facts)
        if device is not None and device.processes:
            used = [p for p in device.processes if p.used_mib]
            return sum(p.used_mib or 0.0 for p in used), [p.pid for p in used], None
    return None, [], None


def _other_process_whose(facts: Facts) -> str | None:
    """stranger / unclear (a listed process that may be this run's own) / None: see ``DERIVED_FACTS``."""
    acc = account_of(facts.log)
    if acc is not None and (acc.listed or acc.self_pid is not None or acc.stranger_mib > 0):
        big = [p for p in acc.listed if p.whose in ("stranger", "unclear")]
        if any(p.whose == "unclear" for p in big):
            return "unclear"
        return "stranger" if big or acc.stranger_mib > 0 else None
    return "stranger" if _other_processes(facts)[0] else None  # NVML: processes alive on this machine now


def _world_size(facts: Facts) -> int | None:
    """GPUs taking part: the log's banner, else the largest lower bound the log gives: ``[rank2]:`` means
    three or more processes, an OOM on ``GPU 5`` means the process sees six or more cards, and the banner's
    Total train batch size is batch x accumulation x GPUs; else the config's."""
    log, config = facts.log, facts.config
    if log is not None and log.world_size:
        return log.world_size
    bounds = [config.world_size] if config is not None else []
    if log is not None:
        if log.rank is not None:
            bounds.append(log.rank + 1)
        if log.gpu_index is not None:
            bounds.append(log.gpu_index + 1)
        per_gpu = (log.instantaneous_batch_size or 0) * (log.gradient_accumulation_steps or 0)
        total = log.total_train_batch_size
        if per_gpu and total and total % per_gpu == 0:
            bounds.append(total // per_gpu)
    return max(bounds) if bounds else None


def _eval_batch(facts: Facts) -> int | None:
    """The evaluation batch in effect; a `llamafactory-cli eval` benchmark run (task:) reads batch_size, whose
    default is LLaMA-Factory's (the defaults table in facts/config.py; None while the table lacks it)."""
    config = facts.config
    if config is None:
        return None
    if config.raw.get("task") is None:
        return config.per_device_eval_batch_size
    value = config.raw.get("batch_size")
    if value is None:
        from oomdoctor.facts.config import lf_defaults

        value = lf_defaults().get("batch_size")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _finetuning_type(facts: Facts, phase: str) -> str | None:
    """What is trained (see ``DERIVED_FACTS``): a partial config (a pasted excerpt) leaves it to the log."""
    config, log = facts.config, facts.log
    if config is not None and config.raw.get("finetuning_type"):
        return config.finetuning_type
    if log is not None:
        total = log.all_params or (facts.model.params if facts.model is not None else None)
        if log.trainable_params and total and log.trainable_params >= FULL_TRAINABLE_SHARE * total:
            return "full"
        if (
            phase == "optimizer_step"
            and log.requested_mib is not None
            and log.requested_mib >= ADAPTER_OPTIMIZER_REQUEST_MAX_MIB
        ):
            return "full"
    return config.finetuning_type if config is not None else None


def _zero_stage(facts: Facts) -> int | None:
    """The ZeRO stage in use: the config's, else what the log shows (a partial config leaves it out)."""
    if facts.config is not None and facts.config.zero_stage is not None:
        return facts.config.zero_stage
    return facts.log.zero_stage if facts.log is not None else None


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


_CAUSE_OF_TERM = {
    "logits_loss": "logits",
    "activations": "activations",
    "weights": "weights",
    "trainable_state": "optimizer_state",
}


def _logits_evidence(facts: Facts, micro_batch: int | None, padded: int | None) -> str | None:
    """frame / size / None: see ``DERIVED_FACTS`` (the logic is facts/logits.py)."""
    log, config, model = facts.log, facts.config, facts.model
    if log is None:
        return None
    if logits_frame(log.frames):
        return "frame"
    lengths = [n for n in (padded, config.cutoff_len if config else None) if n]
    vocab = model.vocab_size if model is not None else None
    stage = config.stage if config is not None else None
    return "size" if request_is_logits(log.requested_mib, micro_batch, lengths, vocab, stage) else None


def _dominant_cause(facts: Facts, logits_evidence: str | None) -> str | None:
    if logits_evidence is not None:
        return "logits"
    est = facts.estimate
    return _CAUSE_OF_TERM.get(est.dominant_term) if est is not None else None


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

    reserve_fits = fragmentation_is_real(account_of(log))

    memory_kind, memory_kind_source = _memory_kind(facts, phase)
    logits_evidence = _logits_evidence(facts, micro_batch, padded)
    card_name = device.name if device is not None else (log.card_name if log is not None else None)
    eval_batch = _eval_batch(facts)
    return {
        "oom": oom,
        "phase": phase,
        "phase_source": phase_source,
        "weights_loaded": weights_loaded,
        "memory_kind": memory_kind,
        "memory_kind_source": memory_kind_source,
        "card_bf16": _card_bf16(facts, card_name),
        "card_name": card_name,
        "zero_stage": _zero_stage(facts),
        "world_size": world_size,
        "finetuning_type": _finetuning_type(facts, phase),
        "micro_batch": micro_batch,
        "accumulation": accumulation,
        "effective_batch": effective,
        "eval_batch": eval_batch,
        "eval_batch_default": (not config.per_device_eval_batch_size_set) if config else None,
        "self_listed_pid": self_pid,
        "other_process_mib": other_mib,
        "other_process_share": share,
        "other_process_pids": other_pids,
        "model_size_mib": model_size,
        "weights_share": _weights_share(model_size, capacity, phase, log),
        "host_ram_needed_mib": model_size * (world_size or 1) if model_size is not None else None,
        "padded_longest_tokens": padded,
        "cutoff_candidate": cutoff[0],
        "cutoff_candidate_source": cutoff[1],
        "cutoff_candidate_truncated": cutoff[2],
        "reserve_would_fit": reserve_fits,
        "other_process_whose": _other_process_whose(facts),
        "logits_evidence": logits_evidence,
        "dominant_cause": _dominant_cause(facts, logits_evidence),
    }
