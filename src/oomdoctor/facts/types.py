"""Typed facts: what the readers found in files and devices. Plain data, no behaviour, no I/O.

Every reader returns one of these. The rules engine reads them through dotted paths such as
``config.per_device_train_batch_size`` or ``log.phase`` (see ``Facts.get``). ``None`` always means
"not known", never "zero" or "off": a rule that needs an unknown fact may ask a question instead.
All memory sizes are MiB (``_mib``), all times seconds (``_s``).
"""

from __future__ import annotations

from typing import Any, Literal

from oomdoctor.records import asdict, field, is_record, record
from oomdoctor.text import Text

Phase = Literal["load", "first_batch", "long_sample", "eval", "save", "optimizer_step", "unknown", "none"]
PHASES: tuple[str, ...] = (
    "load",
    "first_batch",
    "long_sample",
    "eval",
    "save",
    "optimizer_step",
    "unknown",
    "none",
)

Cause = Literal[
    "weights",
    "activations",
    "logits",
    "eval_batch",
    "optimizer_state",
    "save_copy",
    "fragmentation",
    "other_process",
    "host_ram",
    "request_exceeds_card",
    "unknown",
]
CAUSES: tuple[str, ...] = (
    "weights",
    "activations",
    "logits",
    "eval_batch",
    "optimizer_state",
    "save_copy",
    "fragmentation",
    "other_process",
    "host_ram",
    "request_exceeds_card",
    "unknown",
)

# What kind of out-of-memory message the log held.
OomKind = Literal[
    "cuda_oom",  # torch.OutOfMemoryError / torch.cuda.OutOfMemoryError / RuntimeError: CUDA out of memory
    "cuda_error",  # CUDA error: out of memory, torch.AcceleratorError, cudaErrorMemoryAllocation
    "cpu_alloc",  # DefaultCPUAllocator: can't allocate memory
    "python_memory",  # MemoryError
    "mmap",  # unable to mmap ... Cannot allocate memory
    "killed",  # bare Killed, exitcode -9, sigkill_handler, kernel OOM killer
    "no_executable_batch",  # accelerate: No executable batch size found, reached zero
    "deepspeed",  # DeepSpeed-specific allocation failures
    "bnb",  # bitsandbytes allocation failures
]


@record
class ConfigFacts:
    """A LLaMA-Factory training config with LLaMA-Factory's defaults applied (facts/config.py is the one
    place that knows those defaults)."""

    path: str
    raw: dict[str, Any]  # the YAML as loaded (plain dicts), before defaults
    stage: str = "sft"  # pt / sft / rm / ppo / dpo / kto
    finetuning_type: str = "lora"  # lora / full / freeze
    model_name_or_path: str | None = None
    template: str | None = None
    dataset: list[str] = field(default_factory=list)
    eval_dataset: list[str] = field(default_factory=list)
    dataset_dir: str = "data"
    val_size: float = 0.0
    max_samples: int | None = None
    per_device_train_batch_size: int = 8
    per_device_eval_batch_size: int = 8
    per_device_eval_batch_size_set: bool = False  # False: the default of 8 is in effect
    gradient_accumulation_steps: int = 1
    world_size: int = 1  # processes taking part, as rules/assemble.py settles it; 1 when unknown
    cutoff_len: int = 2048
    packing: bool = False
    fp16: bool = False
    bf16: bool = False
    pure_bf16: bool = False
    precision: str = "fp32"  # fp32 / fp16 / bf16 / pure_bf16
    gradient_checkpointing: bool = True  # on unless disable_gradient_checkpointing
    gradient_checkpointing_by_default: bool = True  # True when on only because of the default
    quantization_bit: int | None = None
    quantization_method: str = "bnb"
    quantization_type: str = "nf4"
    double_quantization: bool = True
    lora_rank: int = 8
    lora_alpha: int = 16  # 2 * lora_rank when unset
    lora_target: str = "all"
    deepspeed: str | None = None  # path as written in the config
    deepspeed_found: bool = False  # the JSON exists and was read
    zero_stage: int | None = None
    offload_optimizer: bool = False
    offload_param: bool = False
    do_eval: bool = False  # an evaluation will run during training
    eval_strategy: str = "no"
    eval_steps: int | None = None
    eval_accumulation_steps: int | None = None
    save_steps: int | None = None
    logging_steps: int | None = None
    max_steps: int | None = None
    num_train_epochs: float = 3.0
    optim: str = "adamw_torch"
    flash_attn: str = "auto"
    enable_liger_kernel: bool = False
    use_unsloth_gc: bool = False
    output_dir: str | None = None
    unknown_keys: list[str] = field(default_factory=list)  # kept and reported, never fatal
    deepspeed_path: str | None = None  # absolute path of the DeepSpeed JSON that was read, if any
    do_train: bool = False  # do_train as written (LLaMA-Factory's default is False)
    # A run with no training step: `llamafactory-cli eval` arguments (task/n_shot), do_predict without do_train,
    # predict_with_generate without do_train (SFT generates only when evaluating or predicting), or do_train
    # written false beside do_eval / do_predict. Anything that runs out after loading runs out in the eval phase.
    evaluation_only: bool = False
    freeze_vision_tower: bool = True  # as settled (LLaMA-Factory's default freezes a multimodal vision tower)
    written_keys: frozenset[str] = frozenset()  # the keys the file sets (empty: no config written at all)

    @property
    def effective_batch(self) -> int:
        """micro-batch x accumulation x ``world_size``: what a config-level what-if keeps constant. The run's
        effective batch is ``Facts.derived.effective_batch`` (None while the world size is unknown)."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps * self.world_size


@record
class OtherProcess:
    """Another process holding memory on the card (from the log's OOM message)."""

    pid: int
    used_mib: float


@record
class LogFacts:
    """What a training log says. ``oom`` False with ``phase`` "none" is a valid answer: no OOM in the log."""

    path: str | None = None
    oom: bool = False
    oom_kind: str | None = None  # one of OomKind
    error_line: str | None = None  # the line that said it ran out, trimmed
    phase: str = "none"  # one of PHASES; "unknown" when it ran out but the log cannot tell when
    phase_evidence: list[str] = field(default_factory=list)  # why that phase: frames/markers seen
    step: int | None = None  # the optimizer step in progress when it ran out (1-based), if known
    total_steps: int | None = None
    good_steps: int | None = None  # optimizer steps that completed before it ran out
    rank: int | None = None  # [rankN] or "GPU N" of the failing process
    gpu_index: int | None = None
    requested_mib: float | None = None  # "Tried to allocate"
    capacity_mib: float | None = None  # "total capacity"
    free_mib: float | None = None
    process_in_use_mib: float | None = None  # "this process has X memory in use"
    allocated_mib: float | None = None  # "X is allocated by PyTorch" / "already allocated"
    reserved_mib: float | None = None  # "reserved in total by PyTorch"
    reserved_unallocated_mib: float | None = None  # "reserved by PyTorch but unallocated"
    other_processes: list[OtherProcess] = field(default_factory=list)  # "Process N has X memory in use"
    allowed_mib: float | None = (
        None  # old format "N allowed": a per-process memory fraction caps this process
    )
    private_pools_mib: float | None = None  # "with N allocated in private pools (e.g., CUDA Graphs)"
    current_active_mib: float | None = None  # Ascend NPU "N current active"
    frames: list[str] = field(default_factory=list)  # function names in the last traceback, outermost first
    warnings: list[str] = field(default_factory=list)  # e.g. allocation retries, "Killing subprocess"
    alloc_retries: int = 0  # "N CUDA malloc retries" / allocator warnings seen
    # Markers from the LLaMA-Factory / Trainer banner
    loading_shards: bool = False  # "Loading checkpoint shards" seen
    weights_loaded: bool | None = None  # True once trainable params / Running training seen
    training_started: bool = False  # "***** Running training *****"
    eval_started: bool = False  # "***** Running Evaluation *****" seen after training began
    saving: bool = False  # "Saving model checkpoint to" was the last marker before the OOM
    gradient_checkpointing_logged: bool = False  # "Gradient checkpointing enabled."
    instantaneous_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    total_train_batch_size: int | None = None
    num_examples: int | None = None
    world_size: int | None = None  # LLaMA-Factory's "Process rank: N, world size: M"
    # The processes a launcher line states: torchrun/deepspeed/accelerate arguments, WORLD_SIZE, "world size:"
    launcher_world_size: int | None = None
    trainable_params: int | None = None
    all_params: int | None = None
    last_loss: float | None = None
    eval_loss: float | None = None
    train_runtime_s: float | None = None
    # where the log ends: the context of the last marker (load / after_load / train / eval / save / after_train /
    # zero_init), None when no marker was seen; with no failure, what the run was doing when the log stops
    stopped_in: str | None = None
    nonfinite_seen: bool = False  # a loss or grad_norm printed as nan / inf (training diverged)
    # that last marker is a warning from the phase's own code (FSDP's state-dict warnings in a save)
    stopped_on_warning: bool = False
    fsdp_seen: bool = False  # a line shows FSDP sharding the run (its state-dict warnings, its class name)
    launched: bool = False  # a launcher's own line (DeepSpeed's runner / launch.py): the run was started
    # an export's command (llamafactory-cli export, export_model.py, swift export): the run merges an adapter or
    # quantizes the model and writes the copy; it trains nothing
    export: bool = False
    # a line says the run resumes from a checkpoint (the Trainer's "Continuing training from checkpoint", the
    # reporter's "resume training from a checkpoint"): what it reads back may sit on the card before the first step
    resumed: bool = False
    # the host's RAM in use at the last report the run printed (DeepSpeed's "CPU Virtual Memory: used = X GB,
    # percent = Y%"; facts/log_host_report.py)
    host_ram_percent: float | None = None
    host_ram_used_gib: float | None = None
    # the run trains on torch.nn.DataParallel: one process over several GPUs, GPU 0 gathering the outputs
    # (facts/log_data_parallel.py); the GPUs when a line names them
    data_parallel: bool = False
    data_parallel_gpus: int | None = None
    # the function the failing traceback runs that gathers the whole model onto each card (ZeRO-3's
    # unwrap_model_for_generation, a weight sync to vLLM; facts/log_gather.py)
    whole_model_gather: str | None = None
    # PyTorch's CPU allocator failed inside the model's forward or loss: the run computes on the CPU
    cpu_compute: bool = False
    vram_allocated_gib: float | None = None  # RECORD_VRAM peak from trainer_log.jsonl
    vram_reserved_gib: float | None = None
    bytes_read: int = 0
    truncated_read: bool = False  # only the tail of a big log was read
    # Added by the log reader (facts/log.py)
    ran_out_of: str | None = None  # "gpu" / "host": which memory the failure was about
    error_type: str | None = None  # exception class as printed, e.g. "torch.OutOfMemoryError", "MemoryError"
    phase_confidence: str | None = None  # "high" (frames / markers say so) / "low" (inferred from absence)
    phase_evidence_text: list[Text] = field(default_factory=list)  # phase_evidence in en + zh
    traceback_cut: bool = False  # the log ends inside a traceback (no error line): phase is where it failed
    other_error: str | None = None  # the error line when the run failed for something other than memory
    host: str | None = None  # "gpu-q-13:" style prefix of the failing process
    runs_seen: int = 1  # runs found in the file (appended nohup.out, restarts)
    encoding: str | None = None  # "utf-8" / "gbk" / "utf-16-le" ...
    # Read by the rules (derived.card_name / card_bf16) when NVML cannot tell: the card's name as the log
    # prints it (an nvidia-smi table or a device banner pasted with the error), e.g. "Tesla V100-SXM2-32GB".
    card_name: str | None = None
    # Phases still possible when ``phase`` is "unknown" but the log narrows it: a traceback cut in the Trainer's
    # after-step hook is evaluation or save ("eval", "save"); the rules choose with the config's schedule.
    phase_candidates: list[str] = field(default_factory=list)
    # DeepSpeed ZeRO stage the log shows (a traceback through ZeRO's stage files, its optimizer banner, its
    # config dump); read by the rules (derived.zero_stage) when the config does not say.
    zero_stage: int | None = None
    # A log of several ranks or nodes (facts/ranks.py): who ran out first, who ran out too, who was torn down.
    ranks: Any = None  # RankReport | None
    # What a set-up before any step was allocating when it failed (phase load): "optimizer_init" (DeepSpeed /
    # torchtune creating the optimizer's partitions and states), "ddp_buckets" (DDP's Reducer: gradient buckets as
    # large as the trainable parameters); None otherwise. The phase is load either way (issue 8 item 4).
    setup_step: str | None = None


@record
class GpuProcess:
    """A process NVML lists on a card, with the memory it holds."""

    pid: int
    used_mib: float | None
    name: str | None = None


@record
class GpuDevice:
    """One card as NVML sees it now."""

    index: int
    name: str
    total_mib: float
    used_mib: float | None = None
    compute_capability: tuple[int, int] | None = None
    bf16_supported: bool | None = None  # compute capability >= 8.0
    processes: list[GpuProcess] = field(default_factory=list)


@record
class GpuFacts:
    """The GPUs as NVML sees them. ``available`` False is a normal state (no driver, CPU machine)."""

    available: bool = False
    reason: str | None = None  # why not available, e.g. "NVML library not found"
    driver: str | None = None
    devices: list[GpuDevice] = field(default_factory=list)

    @property
    def first(self) -> GpuDevice | None:
        return self.devices[0] if self.devices else None


@record
class ModelFacts:
    """Shape of the model (from its config.json or the built-in table)."""

    name: str | None = None
    source: str = "unknown"  # "config.json:<path>" / "table:<key>" / "unknown"
    architecture: str | None = None
    hidden_size: int | None = None
    num_layers: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    tie_word_embeddings: bool = False
    params: int | None = None  # total parameters
    torch_dtype: str | None = None
    # Appended for the memory model (facts/model.py fills them; traits come from model_table.yaml families)
    model_type: str | None = None  # config.json model_type, e.g. "qwen3"
    gated_mlp: bool = True  # gate/up/down (SwiGLU, GeGLU) rather than fc1/fc2
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head RMSNorm on queries and keys (Qwen3, Gemma 3)
    attn_default: str | None = None  # attention LLaMA-Factory falls back to for flash_attn auto, if not sdpa
    num_experts: int | None = None  # MoE: routed experts per layer
    num_experts_per_tok: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    params_active: int | None = None  # MoE: parameters used per token
    embedding_params: int | None = None  # input embeddings (+ untied lm_head): never quantised


@record
class DataFacts:
    """Real token lengths of the training (and eval) samples, as LLaMA-Factory would build them."""

    source: str = "unknown"  # "tokenized" / "given" (e.g. --longest-tokens) / "unknown"
    samples: int | None = None
    max_tokens: int | None = None
    p50_tokens: int | None = None
    p95_tokens: int | None = None
    p99_tokens: int | None = None
    eval_samples: int | None = None
    eval_max_tokens: int | None = None
    cutoff_len: int | None = None
    truncated: int | None = None  # samples longer than cutoff_len


def to_jsonable(obj: Any) -> Any:
    """Records and dataclasses -> dicts, tuples -> lists, for ``--json`` output."""
    if is_record(obj) or hasattr(obj, "__dataclass_fields__"):
        return to_jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj
