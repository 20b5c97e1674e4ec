"""The answer-dependent part of ``rules.assemble``: the derived facts (``derived.<name>`` in rule files)
computed from a draft bundle whose run size (card, world size, batch, phase candidates) is already settled.

They exist where a plain fact path is not enough: a user's answer overrides what the log says, and "another
process" must not count the failing process when a container shows it under its host pid. The fields and
their meanings are ``rules.facts.Derived``; nothing here is called but through ``assemble``.
"""

from __future__ import annotations

import math

from oomdoctor import records
from oomdoctor.facts.account import UNMEASURED_MIB, account_of, reserve_is_real
from oomdoctor.facts.logits import logits_frame, request_is_logits, request_is_logprob_logits
from oomdoctor.facts.types import ConfigFacts, GpuDevice, LogFacts
from oomdoctor.lazyre import lazy
from oomdoctor.rules.facts import BATCH_PHASES, Derived, Facts
from oomdoctor.rules.host_report import host_full_at_stop
from oomdoctor.rules.log_stop import log_stop
from oomdoctor.rules.questions import said_no_oom, yes_no

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
# In a training step the weights have loaded and fit: they are what to shrink there only when they are known
# to take at least this share of the card, the run trains every parameter, or (their share unknown) the
# failing frame gathers sharded parameters (below).
STEP_WEIGHTS_SHARE = 0.3
PARAMETER_GATHER_FRAMES: frozenset[str] = frozenset(
    {
        "all_gather",
        "_allgather_params",
        "fetch_sub_module",
        "_all_gather",
        "_alloc_padded_unsharded_flat_param",
        "_unshard_fsdp_state_params",
        "_unshard",
    }
)
# No single weight, gradient or Adam tensor of a released model is one allocation this large (the largest, an
# fp32 copy of a 256k x 8192 embedding, is 8 GiB): a step that asks for more at once is computing activations
# or logits.
STEP_TENSOR_MIN_MIB = 8192.0
# The largest world size a sharded run is tried at when nothing states it (the world_size question's top
# answer): the dominant term is trusted only when it is the same at both ends of what the run may be, the
# processes a rank number proves and this (sharding divides optimizer state, gradients and, at stage 3 / FSDP
# full shard, weights by the world size, so each term moves one way as it grows: two probes are enough).
WORLD_SIZE_TOP = 64
# Full fine-tuning shows in the log when the trainable parameters are at least this share of the model...
FULL_TRAINABLE_SHARE = 0.5
# ... or when the optimizer step (or the set-up creating the optimizer's state, log.setup_step optimizer_init)
# asks for at least this much at once: Adam's temporaries and states are as large as one trained tensor (or one
# ZeRO partition of them), and LoRA adapters of any usual rank are far smaller.
ADAPTER_OPTIMIZER_REQUEST_MAX_MIB = 1024.0


def _round_up(value: int, multiple: int = PAD_MULTIPLE) -> int:
    return int(math.ceil(value / multiple) * multiple)


def log_failed(facts: Facts) -> bool:
    """The log shows the run failing for memory, or a traceback cut before its error line (a pasted
    excerpt) whose memory the user has since named: frames alone are no evidence of an OOM (a cut ValueError
    has the same frames), so until then it is "no error line" and the memory kind is asked."""
    log = facts.log
    unsaid = error_line_missing(facts) or log_stops_silently(facts)
    return log is not None and (log.oom or (unsaid and _oom_confirmed(facts)))


def log_stops_silently(facts: Facts) -> bool:
    """The log shows a run under way and stops with no error line of any kind (rules/log_stop.py)."""
    return log_stop(facts.config, facts.log) is not None


def error_line_missing(facts: Facts) -> bool:
    """The log ends inside a traceback with no error line at all (no memory wording, no other error)."""
    log = facts.log
    return log is not None and not log.oom and log.traceback_cut and not log.other_error


def _oom_confirmed(facts: Facts) -> bool:
    """The cut traceback counts as an OOM where it stopped when its frames place a phase or narrow it (a pasted OOM excerpt
    cut by the paster), or the user said which memory ran out or where, or the run's own report showed the host's
    RAM full where a silent log stops (rules/host_report.py). Frames that place nothing (module entry points,
    glued tracebacks of several processes) are no evidence of an OOM."""
    if said_no_oom(facts.answers):
        return False
    return "memory_kind" in facts.answers or "phase" in facts.answers or host_full_at_stop(facts)


def _phase_by_schedule(facts: Facts) -> str | None:
    """The log narrowed the phase to candidates (a failure in the after-step hook: evaluation or save); the
    config's schedule at that step kept one of them (``derived.phase_candidates``), or None."""
    possible = facts.derived.phase_candidates
    if facts.config is None or len(possible) != 1:
        return None
    return possible[0]


def _phase(facts: Facts, weights_loaded: bool | None) -> tuple[str, str]:
    answered = facts.answers.get("phase")
    if answered:
        return answered, "answer"
    log = facts.log
    # where it failed, or where a traceback cut before its error line stopped (said as such until its memory is
    # named: ``log_failed``)
    stopped = log is not None and (log_failed(facts) or error_line_missing(facts))
    if log is not None and stopped and log.phase not in ("unknown", "none"):
        return log.phase, "log"
    if log is not None and stopped:
        scheduled = _phase_by_schedule(facts)
        if scheduled is not None:
            return scheduled, "schedule"
    if weights_loaded is False:
        return "load", "weights_loaded"
    stop = log_stop(facts.config, log)
    if stop is not None and stop.where == "load" and log_failed(facts) and not _gpu_past_loading(facts):
        return "load", "log_stop"  # confirmed an OOM by an answer: the log stops before the first step
    config = facts.config
    over = _weights_against_card(facts) if log is None else None  # with no log: do the weights fit the card?
    if over is not None and over > 0:
        return "load", "weights_size"  # no log: the weights alone do not fit, so it stops while loading
    if log is None and over is None and _weights_beyond_every_card(facts):
        return "load", "weights_size_any_card"  # no card size, but no card the tool knows holds them
    if _export_failed(facts):
        return "load", "config"
    by_config = config is not None and evaluation_only(config)
    if (
        (by_config or _answered_predict(facts, weights_loaded))
        and ((over is not None and over < 0) if log is None else log_failed(facts))
        and not _card_held_by_others(facts)
    ):
        # nothing but evaluation (or generation: a chat) runs after the weights load; with no log that holds only
        # where the weights fit a card of known size (else loading is as likely, and the phase is asked)
        return "eval", ("config" if by_config else "run_kind")
    if _bare_logits_request(facts):
        return ("long_sample" if log is not None and log.good_steps else "first_batch"), "logits_size"
    return "unknown", "none"


def _export_failed(facts: Facts) -> bool:
    """An export config (``facts.config.exports``) whose log shows it failing for memory: LLaMA-Factory's
    export_model does its memory's work in load_model (reading the weights, merging the adapter into them,
    GPTQ-quantizing them while they load) and then only writes shards of export_size GB, so it ran out at
    loading. Without a log the phase stays asked (the export may have failed otherwise)."""
    from oomdoctor.facts.config import exports

    config = facts.config
    return config is not None and exports(config) and facts.log is not None and log_failed(facts)


# What a run that only generates is (derived.run_kind): it runs out where it evaluates, once the weights loaded.
GENERATING_RUN_KINDS = frozenset({"predict", "chat"})


def _answered_predict(facts: Facts, weights_loaded: bool | None) -> bool:
    """The user says the run only predicts or chats (``derived.run_kind``, neither the config nor the log shows
    training), and the log does not leave loading open: the weights loaded, or it shows no frames at all (a
    bare message; frames that place nothing may still be the load's)."""
    if _run_kind(facts) not in GENERATING_RUN_KINDS or weights_loaded is False:
        return False
    log = facts.log
    return weights_loaded is True or log is None or not log.frames


def _gpu_past_loading(facts: Facts) -> bool:
    """The log stops after its own markers said the model had finished loading (``stopped_in`` after_load) and
    the answer is that the GPU ran out: the loaded weights were on the card, so what failed came after loading."""
    log = facts.log
    return log is not None and log.stopped_in == "after_load" and facts.answers.get("memory_kind") == "gpu"


def _weights_against_card(facts: Facts) -> float | None:
    """The estimate's weights on each card (after quantisation and ZeRO-3 sharding) minus the card's size, where
    both are known: negative when they fit, positive when they alone do not."""
    capacity, est = facts.derived.capacity_mib, facts.estimate
    weights = est.terms.get("weights") if est is not None else None
    return weights - capacity if capacity and weights else None


def _weights_beyond_every_card(facts: Facts) -> bool:
    """The estimate's weights on each card are more than the largest card of the table holds, and nothing
    shards them over an unstated number of processes (ZeRO-3 or FSDP): with LLaMA-Factory placing the whole
    model on each process's card for training and prediction, it cannot have got past loading."""
    est = facts.estimate
    weights = est.terms.get("weights") if est is not None else None
    if not weights or facts.config is None:
        return False
    if facts.derived.world_size_open:
        return False
    from oomdoctor.estimate.cards import largest_card

    return weights > largest_card().total_mib


def evaluation_only(config: ConfigFacts) -> bool:
    """The config runs no training step, as the config reader settles it (``ConfigFacts.evaluation_only``)."""
    return config.evaluation_only


def _bare_logits_request(facts: Facts) -> bool:
    """A GPU message with no frames to place it whose request is this batch's logits (batch x padded length x
    vocabulary x 4 or 2 bytes, facts/logits.py): only the training step's loss allocates that tensor."""
    log, config, model = facts.log, facts.config, facts.model
    if log is None or not log.oom or log.frames or log.ran_out_of != "gpu" or config is None or model is None:
        return False
    lengths = [n for n in (_padded_longest(facts), config.cutoff_len) if n]
    return request_is_logits(
        log.requested_mib, facts.derived.micro_batch, lengths, model.vocab_size, config.stage
    )


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
    if said_no_oom(facts.answers):
        return None, "answer"  # no memory ran out, by the user's word (derived.oom is False)
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
    if host_full_at_stop(facts):
        return "host", "log"  # the run's own report: the host's RAM was full where the log stops
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
    by_name = bf16_of_card_name(card_name) if card_name else None
    if by_name is None and _trained_in_bf16(facts):
        return True  # the run itself computed in bf16 for whole steps: the card does
    return by_name


def _trained_in_bf16(facts: Facts) -> bool:
    """The config trains in bf16 and the log shows optimizer steps that completed before it ran out."""
    config, log = facts.config, facts.log
    return (
        config is not None
        and config.precision in ("bf16", "pure_bf16")
        and log is not None
        and (log.good_steps or 0) > 0
    )


_MODEL_WORD = lazy(r"[a-z]*\d+[a-z]*")  # "v100", "a100", "4090", "h20": the words that name a card
_SIZE_WORD = lazy(r"\d+(gb|g)$")  # "32gb": a memory size, shared by many cards


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
        held = acc.listed_mib + acc.held_by_unmeasured_mib  # "0 bytes" entries: their share from the sum
        return held, [p.pid for p in acc.listed], acc.self_pid
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
    """stranger / unclear (a listed process that may be this run's own) / None: see ``Derived``."""
    acc = account_of(facts.log)
    if acc is not None and (acc.listed or acc.self_pid is not None or acc.stranger_mib > 0):
        big = [p for p in acc.listed if p.whose in ("stranger", "unclear")]
        if any(p.whose == "unclear" for p in big) or acc.held_by_unmeasured_mib > 0:
            return "unclear"  # "0 bytes" entries holding the rest: this run's other ranks, or another job
        if acc.own_ranks and not big:
            return "own_ranks"
        if not big and _self_unmeasured(facts.log):
            return (
                "unclear"  # this process's own use unread: its non-PyTorch share (a colocated vLLM) or a job
            )
        return "stranger" if big or acc.stranger_mib > 0 else None
    return "stranger" if _other_processes(facts)[0] else None  # NVML: processes alive on this machine now


def _self_unmeasured(log: LogFacts | None) -> bool:
    """The message says "this process has 0 bytes memory in use": the driver could not read this process's own
    use (a container), so what lies outside PyTorch's reserve may be this process's own non-PyTorch memory (a
    vLLM engine colocated in it, NCCL buffers) as well as another job's."""
    used = log.process_in_use_mib if log is not None else None
    return used is not None and used <= UNMEASURED_MIB


_CAUSE_OF_TERM = {
    "logits_loss": "logits",
    "activations": "activations",
    "weights": "weights",
    "trainable_state": "optimizer_state",
}


def _logits_evidence(facts: Facts, padded: int | None) -> str | None:
    """frame / size / None: see ``Derived.logits_evidence`` (the logic is facts/logits.py)."""
    log, config, model = facts.log, facts.config, facts.model
    if log is None:
        return None
    if logits_frame(log.frames):
        return "frame"
    lengths = [n for n in (padded, config.cutoff_len if config else None) if n]
    vocab = model.vocab_size if model is not None else None
    stage = config.stage if config is not None else None
    micro_batch = facts.derived.micro_batch
    if request_is_logits(log.requested_mib, micro_batch, lengths, vocab, stage):
        return "size"
    return (
        "share"
        if request_is_logprob_logits(log.requested_mib, facts.derived.capacity_mib, vocab, stage)
        else None
    )


def _dominant_cause(
    facts: Facts, logits_evidence: str | None
) -> tuple[str | None, tuple[tuple[int, str], ...]]:
    """(the failing step's biggest term as a cause, the terms by world size when they differ): see
    ``Derived.dominant_cause`` and ``Derived.dominant_by_world``."""
    if logits_evidence is not None:
        return "logits", ()
    est = facts.estimate
    if est is None:
        return None, ()
    if not facts.derived.world_size_open or facts.config is None or facts.model is None:
        return _CAUSE_OF_TERM.get(est.dominant_term), ()
    low = max(1, facts.derived.processes_at_least or 1)
    sizes = (low, WORLD_SIZE_TOP) if low < WORLD_SIZE_TOP else (low,)
    by_world = [(size, term) for size in sizes if (term := _dominant_at(facts, size)) is not None]
    if len({term for _, term in by_world}) < 2:
        return _CAUSE_OF_TERM.get(by_world[0][1] if by_world else est.dominant_term), ()
    return None, tuple(by_world)


def _dominant_at(facts: Facts, world_size: int) -> str | None:
    """The estimate's dominant term had the run ``world_size`` processes (None: no estimate at that size)."""
    from oomdoctor.errors import BadInput
    from oomdoctor.estimate import estimate

    config, model = facts.config, facts.model
    assert config is not None and model is not None
    sized = records.replace(config, world_size=world_size)
    capacity = facts.derived.capacity_mib
    try:
        at_size = estimate(
            sized, model, data=facts.data, gpu_total_mib=capacity, calibration=facts.calibration()
        )
    except BadInput:
        return None
    return at_size.dominant_term


def _request_is_step_tensor(log: LogFacts | None, phase: str) -> bool:
    """In a forward/backward, the request is larger than any single weight, gradient or Adam tensor can be
    (STEP_TENSOR_MIN_MIB)."""
    # only the forward/backward's (BATCH_PHASES): loading (DeepSpeed's initialise flattens every parameter
    # into one buffer) and the optimizer step (a fused update over flattened tensors) have their own that large
    return phase in BATCH_PHASES and log is not None and (log.requested_mib or 0.0) >= STEP_TENSOR_MIN_MIB


def _weights_fill_step(
    facts: Facts, weights_share: float | None, finetuning_type: str | None, phase: str
) -> bool:
    """In a training step, the weights are known to be what fills the card: see ``Derived.weights_fill_step``."""
    config, log = facts.config, facts.log
    if config is not None and config.offload_param and _zero_stage(facts) == 3:
        return False  # ZeRO-3 keeps them in host memory, gathering a layer at a time
    if _request_is_step_tensor(log, phase):
        return False
    if finetuning_type == "full":
        return True  # a gradient and Adam state per parameter: several times the weights, on every card
    if weights_share is not None:
        return weights_share >= STEP_WEIGHTS_SHARE
    # Their share unknown (no estimate), a ZeRO-3 / FSDP gather in the failing frames is what is left: it tells the
    # phase, and that the sharded weights are gathered on this card; with the share known, that share decides.
    return log is not None and bool(PARAMETER_GATHER_FRAMES.intersection(log.frames))


STEP_PHASES = frozenset({"first_batch", "long_sample", "optimizer_step"})


def _fixed_cause(phase: str, finetuning_type: str | None, setup_step: str | None = None) -> str | None:
    """See ``Derived.fixed_cause``."""
    if phase == "unknown":
        return None
    if phase == "load" and setup_step == "optimizer_init":
        return "optimizer_state"  # the set-up was creating the optimizer's partitions and states (LogFacts)
    return "optimizer_state" if finetuning_type == "full" and phase in STEP_PHASES else "weights"


PRECISION_KEYS = frozenset({"bf16", "fp16", "pure_bf16"})
WHOLE_CONFIG_KEYS = frozenset(
    {"model_name_or_path", "dataset"}
)  # what every LLaMA-Factory training config has


def _precision_stated(config: ConfigFacts | None) -> bool:
    """See ``Derived.precision_stated``."""
    if config is None:
        return False
    written = config.written_keys
    return bool(PRECISION_KEYS & written) or written >= WHOLE_CONFIG_KEYS


def _eval_batch(facts: Facts) -> int | None:
    """The evaluation batch in effect; a `llamafactory-cli eval` benchmark run (task:) reads batch_size, whose
    default is LLaMA-Factory's (the defaults table in facts/config.py; None while the table lacks it)."""
    from oomdoctor.facts.config import setting, written

    config = facts.config
    if config is None:
        return None
    if not written(config, "task"):
        return config.per_device_eval_batch_size
    value = setting(config, "batch_size")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _finetuning_type(facts: Facts, phase: str) -> str | None:
    """What is trained (see ``Derived.finetuning_type``): a partial config (a pasted excerpt) leaves it to
    the log."""
    from oomdoctor.facts.config import written

    config, log = facts.config, facts.log
    if config is not None and written(config, "finetuning_type"):
        return config.finetuning_type
    if log is not None:
        total = log.all_params or (facts.model.params if facts.model is not None else None)
        if log.trainable_params and total and log.trainable_params >= FULL_TRAINABLE_SHARE * total:
            return "full"
        if (
            _creates_optimizer_state(phase, log)
            and log.requested_mib is not None
            and log.requested_mib >= ADAPTER_OPTIMIZER_REQUEST_MAX_MIB
        ):
            return "full"
    if config is not None and not config.written_keys and _creates_optimizer_state(phase, log):
        return (
            None  # no config written at all: LLaMA-Factory's default (lora) is no evidence against the step's
        )
    return config.finetuning_type if config is not None else None


def _liger_fuses_loss(config: ConfigFacts | None) -> bool | None:
    """See ``Derived.liger_fuses_loss``: the estimate's own list of the stages Liger fuses."""
    from oomdoctor.estimate.memory import liger_fuses_loss

    return liger_fuses_loss(config.stage) if config is not None else None


def _creates_optimizer_state(phase: str, log: LogFacts | None) -> bool:
    """It ran out where the optimizer's state is made or updated: the optimizer step, or the set-up that
    creates the optimizer's partitions and states at load (``log.setup_step`` optimizer_init)."""
    setup = log.setup_step if log is not None else None
    return phase == "optimizer_step" or (phase == "load" and setup == "optimizer_init")


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
    capacity = facts.derived.capacity_mib
    if config is None or model is None or facts.estimate is None or not capacity:
        return None
    from oomdoctor.estimate import estimate, with_changes

    calibration = facts.calibration()
    cutoff = (limit - 1) // CUTOFF_STEP * CUTOFF_STEP
    while cutoff >= CUTOFF_STEP:
        trial = with_changes(config, {"cutoff_len": cutoff})
        if estimate(trial, model, data=facts.data, gpu_total_mib=capacity, calibration=calibration).fits:
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


def _weights_loaded(facts: Facts) -> bool | None:
    answered = yes_no(facts.answers.get("weights_loaded"))
    if answered is None and facts.log is not None:
        return facts.log.weights_loaded
    return answered


def _padded_longest(facts: Facts) -> int | None:
    config, data = facts.config, facts.data
    if data is None or not data.max_tokens:
        return None
    return _round_up(min(data.max_tokens, config.cutoff_len) if config else data.max_tokens)


def _reserve_would_fit(log: LogFacts | None) -> bool | None:
    """The unused reserve is a real share of the card and would have served the request (facts/account.py)."""
    if log is None:
        return None
    return reserve_is_real(log.reserved_unallocated_mib, log.free_mib, log.capacity_mib, log.requested_mib)


def derive(facts: Facts, reuse: Derived | None = None) -> Derived:
    """The draft's ``derived`` (its settled run size) completed with every answer-dependent fact.

    ``reuse``: an earlier result for the same readings (only the answers differ), whose costly answers
    (the cutoff search) are kept.
    """
    weights_loaded = _weights_loaded(facts)
    phase, phase_source = _phase(facts, weights_loaded)
    if phase in ("first_batch", "long_sample", "eval", "save", "optimizer_step") and weights_loaded is None:
        weights_loaded = True
    return _with_sizes(facts, _with_phase(facts, phase, phase_source, weights_loaded), reuse)


def _with_phase(facts: Facts, phase: str, phase_source: str, weights_loaded: bool | None) -> Derived:
    """The settled run size with where it failed and what that settles: the memory kind, the card, the method."""
    config, log, run = facts.config, facts.log, facts.derived
    device = _failing_device(facts)
    memory_kind, memory_kind_source = _memory_kind(facts, phase)
    card_name = device.name if device is not None else (log.card_name if log is not None else None)
    stop = log_stop(config, log)
    finetuning_type = _finetuning_type(facts, phase)
    return records.replace(
        run,
        oom=not said_no_oom(facts.answers) and (log is None or log_failed(facts) or "phase" in facts.answers),
        phase=phase,
        phase_source=phase_source,
        weights_loaded=weights_loaded,
        memory_kind=memory_kind,
        memory_kind_source=memory_kind_source,
        card_bf16=_card_bf16(facts, card_name),
        card_name=card_name,
        zero_stage=_zero_stage(facts),
        finetuning_type=finetuning_type,
        eval_batch=_eval_batch(facts),
        eval_batch_default=(not config.per_device_eval_batch_size_set) if config else None,
        precision_stated=_precision_stated(config),
        fixed_cause=_fixed_cause(phase, finetuning_type, log.setup_step if log is not None else None),
        resumes=_resumes(facts),
        creates_optimizer_state=_creates_optimizer_state(phase, log),
        liger_fuses_loss=_liger_fuses_loss(config),
        frames_seen=bool(log is not None and log.frames),
        run_kind=_run_kind(facts),
        log_stop=stop.where if stop is not None else None,
        log_stop_next=stop.next_kind if stop is not None else None,
    )


# A written resume_from_checkpoint that resumes nothing (YAML's false, or a "none" spelt out).
NOT_A_CHECKPOINT = frozenset({"false", "none", "null", "no"})


def _resumes(facts: Facts) -> bool | None:
    """See ``Derived.resumes``: the config's own resume_from_checkpoint settles it; else the user's answer."""
    from oomdoctor.facts.config import setting

    config = facts.config
    value = setting(config, "resume_from_checkpoint") if config is not None else None
    if value is True or (
        isinstance(value, str) and value.strip() and value.strip().lower() not in NOT_A_CHECKPOINT
    ):
        return True
    return yes_no(facts.answers.get("resumed"))


# Frames only a training run passes through (the Trainer's loop and its step).
TRAINING_FRAMES = frozenset({"_inner_training_loop", "training_step"})


def _run_kind(facts: Facts) -> str | None:
    """See ``Derived.run_kind``: what the config runs, else a log that shows training or a resume, else the
    user's answer."""
    from oomdoctor.facts.config import exports, writes_training_keys

    config, log = facts.config, facts.log
    if config is not None and exports(config):
        return "export"
    if config is not None and evaluation_only(config):
        return "predict"
    if config is not None and (config.do_train or writes_training_keys(config)):
        return "train"
    if log is not None and (
        log.training_started or log.good_steps or TRAINING_FRAMES.intersection(log.frames)
    ):
        return "train"
    if _resumes(facts):
        return "train"  # only a training resumes from a checkpoint
    return facts.answers.get("run_kind") or None


def _with_sizes(facts: Facts, run: Derived, reuse: Derived | None) -> Derived:
    """``run`` (phase settled) with the sizes against the card: other processes, weights, reserve, cutoff."""
    log, phase = facts.log, run.phase
    other_mib, other_pids, self_pid = _other_processes(facts)
    capacity = run.capacity_mib
    model_size = _model_size_mib(facts)
    if reuse is not None:
        cutoff = (reuse.cutoff_candidate, reuse.cutoff_candidate_source, reuse.cutoff_candidate_truncated)
    else:
        cutoff = _cutoff_candidate(facts)
    padded = _padded_longest(facts)
    logits_evidence = _logits_evidence(facts, padded)
    dominant_cause, dominant_by_world = _dominant_cause(facts, logits_evidence)
    weights_share = _weights_share(model_size, capacity, phase, log)
    return records.replace(
        run,
        self_listed_pid=self_pid,
        other_process_mib=other_mib,
        other_process_share=other_mib / capacity if other_mib is not None and capacity else None,
        other_process_pids=tuple(other_pids),
        model_size_mib=model_size,
        weights_share=weights_share,
        weights_fill_step=_weights_fill_step(facts, weights_share, run.finetuning_type, phase),
        request_is_step_tensor=_request_is_step_tensor(log, phase),
        host_ram_needed_mib=(model_size * (run.processes_at_least or 1) if model_size is not None else None),
        padded_longest_tokens=padded,
        cutoff_candidate=cutoff[0],
        cutoff_candidate_source=cutoff[1],
        cutoff_candidate_truncated=cutoff[2],
        reserve_would_fit=_reserve_would_fit(log),
        other_process_whose=_other_process_whose(facts),
        logits_evidence=logits_evidence,
        dominant_cause=dominant_cause,
        dominant_by_world=dominant_by_world,
    )
