"""Peak GPU memory of one LLaMA-Factory training process, term by term and phase by phase.

Peak allocated = weights + trainable state + stored activations + max(logits/loss, one recomputed layer)
+ small allocations. What nvidia-smi shows is that, inflated by PyTorch's caching allocator, plus the CUDA
context. ``weights`` holds every parameter as stored (fp32 LoRA adapters included); ``trainable_state`` is
gradients + optimizer state (+ autocast's 16-bit weight copies under AMP full fine-tuning), so LoRA's
16 bytes per adapter parameter are 4 in weights and 12 in trainable_state. The numbers come from
``memory_model.yaml``; this module only applies them to the config and the
model's shape. It must stay fast (no torch, well under 50 ms) because the TUI and the search for a fitting
micro-batch call it many times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from oomdoctor.datafiles import load_data_file
from oomdoctor.errors import BadInput
from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.types import ConfigFacts, DataFacts, ModelFacts
from oomdoctor.i18n import both, msg

MIB = 1024.0 * 1024.0
_MODEL_PATH = Path(__file__).with_name("memory_model.yaml")

# LoRA target names as users and LLaMA-Factory write them -> the linear layers of a decoder block.
_TARGET_ALIASES: dict[str, tuple[str, ...]] = {
    "q_proj": ("q",),
    "k_proj": ("k",),
    "v_proj": ("v",),
    "o_proj": ("o",),
    "q": ("q",),
    "k": ("k",),
    "v": ("v",),
    "o": ("o",),
    "query": ("q",),
    "key": ("k",),
    "value": ("v",),
    "dense": ("o",),
    "out_proj": ("o",),
    "c_proj": ("o",),
    "wo": ("o",),
    "w_pack": ("q", "k", "v"),
    "qkv_proj": ("q", "k", "v"),
    "query_key_value": ("q", "k", "v"),
    "c_attn": ("q", "k", "v"),
    "wqkv": ("q", "k", "v"),
    "gate_proj": ("gate",),
    "up_proj": ("up",),
    "down_proj": ("down",),
    "gate_up_proj": ("gate", "up"),
    "w1": ("gate",),
    "w3": ("up",),
    "w2": ("down",),
    "fc1": ("up",),
    "fc2": ("down",),
    "dense_h_to_4h": ("up",),
    "dense_4h_to_h": ("down",),
}
_ALL_LINEARS = ("q", "k", "v", "o", "gate", "up", "down")


@lru_cache(maxsize=1)
def constants() -> dict[str, Any]:
    """The memory model's numbers (memory_model.yaml), read once."""
    return load_data_file(_MODEL_PATH)


def round_up(value: int, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def lora_dropout(config: ConfigFacts) -> float:
    """The run's lora_dropout (the YAML value, else LLaMA-Factory's default from memory_model.yaml)."""
    value = config.raw.get("lora_dropout") if isinstance(config.raw, dict) else None
    try:
        return float(value) if value is not None else float(constants()["lora_dropout_default"])
    except (TypeError, ValueError):
        return float(constants()["lora_dropout_default"])


def lora_targets(lora_target: str | None) -> tuple[set[str], list[str]]:
    """Which block linears carry LoRA (``all`` = every linear but the lm_head) and the names we did not know."""
    text = (lora_target or "all").strip().lower()
    if text in ("all", ""):
        return set(_ALL_LINEARS), []
    found: set[str] = set()
    unknown: list[str] = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        hit = _TARGET_ALIASES.get(name.split(".")[-1])
        if hit is None:
            unknown.append(name)
        else:
            found.update(hit)
    return found, unknown


@dataclass
class _Shape:
    """The model's dimensions with the gaps filled (head_dim from hidden/heads, ...)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    params: int
    embedding_params: int
    gated: bool
    norms: int
    qk_norm: bool
    experts: int | None
    experts_per_token: int
    expert_width: int
    shared_width: int

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linear_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each block linear; MoE layers list one expert's width."""
        width = self.expert_width if self.experts else self.intermediate
        return {
            "q": (self.hidden, self.q_dim),
            "k": (self.hidden, self.kv_dim),
            "v": (self.hidden, self.kv_dim),
            "o": (self.q_dim, self.hidden),
            "gate": (self.hidden, width),
            "up": (self.hidden, width),
            "down": (width, self.hidden),
        }


def _shape(model: ModelFacts) -> _Shape:
    missing = [
        name
        for name, value in (
            ("hidden_size", model.hidden_size),
            ("num_layers", model.num_layers),
            ("num_attention_heads", model.num_attention_heads),
            ("vocab_size", model.vocab_size),
        )
        if not value
    ]
    if missing:
        raise BadInput(msg("est_model_unknown", None, name=model.name or "?", missing=", ".join(missing)))
    hidden = int(model.hidden_size or 0)
    heads = int(model.num_attention_heads or 1)
    head_dim = int(model.head_dim or hidden // heads)
    params = model.params
    embedding = model.embedding_params
    if params is None or embedding is None:
        from oomdoctor.facts.model import count_params

        params, _active, embedding = count_params(model)
    return _Shape(
        hidden=hidden,
        layers=int(model.num_layers or 0),
        heads=heads,
        kv_heads=int(model.num_key_value_heads or heads),
        head_dim=head_dim,
        intermediate=int(model.intermediate_size or 4 * hidden),
        vocab=int(model.vocab_size or 0),
        params=int(params),
        embedding_params=int(embedding),
        gated=model.gated_mlp,
        norms=model.norms_per_layer,
        qk_norm=model.qk_norm,
        experts=model.num_experts,
        experts_per_token=int(model.num_experts_per_tok or 1),
        expert_width=int(model.moe_intermediate_size or model.intermediate_size or 4 * hidden),
        shared_width=int(model.shared_expert_intermediate_size or 0),
    )


@dataclass
class _Notes:
    """Assumptions collected while estimating, as message keys rendered in both languages."""

    keys: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, key: str, **fields: Any) -> None:
        if (key, fields) not in self.keys:
            self.keys.append((key, fields))

    def rendered(self) -> list[dict[str, str]]:
        return [both(key, **fields) for key, fields in self.keys]


def _attention_impl(config: ConfigFacts, model: ModelFacts, notes: _Notes) -> str:
    """The attention LLaMA-Factory will run: eager, sdpa or fa2 (fa3 behaves like fa2 for memory)."""
    wanted = (config.flash_attn or "auto").lower()
    if wanted in ("disabled", "eager", "off", "false"):
        return "eager"
    if wanted in ("fa2", "fa3", "flash_attention_2", "flash_attention_3"):
        return "fa2"
    if wanted == "auto" and model.attn_default == "eager":
        notes.add("est_note_eager_default", model=model.model_type or "?")
        return "eager"
    return "sdpa"


def _layer_bytes_per_token(
    s: _Shape,
    *,
    seq_len: int,
    micro_batch: int,
    attention: str,
    trainable: set[str],
    full: bool,
    act_bytes: int,
    copy_bytes: int,
    quantized_input_bytes: int,
    norm_weight_bytes: int,
    k: dict[str, Any],
) -> float:
    """Bytes autograd saves per token in one decoder layer without checkpointing.

    A frozen 16-bit linear saves nothing (its input is only needed for a weight gradient). A linear whose
    input is cast on the way in (LoRA under AMP or fp32 adapters: PEFT casts to the adapter's dtype and
    autocast casts back; full fine-tuning under AMP) holds its own copy, ``copy_bytes`` per input feature.
    Otherwise each distinct input tensor is kept once: by trainable linears (pure bf16 LoRA, full
    fine-tuning) and by bitsandbytes' quantised matmul, which keeps its input whenever that input needs a
    gradient. Checked against autograd's saved tensors for HF Llama/Qwen3 + PEFT on CPU: within about 7 %
    (benchmarks/bench_estimate.py --activations).
    """
    h, q, kv = s.hidden, s.q_dim, s.kv_dim
    dims = s.linear_dims()
    mid = s.expert_width if s.experts else s.intermediate
    routed = s.experts_per_token if s.experts else 1
    total = float(s.norms * k["norm_saved_bytes"] * h)
    total += s.norms * norm_weight_bytes * h  # trainable norm weights keep their normalised input

    def in_mlp_experts(name: str) -> bool:
        return bool(s.experts) and name in ("gate", "up", "down")

    # Per-linear copies
    if copy_bytes:
        total += sum(copy_bytes * dims[name][0] * (routed if in_mlp_experts(name) else 1) for name in trainable if not (in_mlp_experts(name) and not full))
    # Distinct inputs kept once
    feeds = {"attn_in": ("q", "k", "v"), "attn_out": ("o",), "mlp_in": ("gate", "up"), "mlp_mid": ("down",)}
    width = {"attn_in": h, "attn_out": q, "mlp_in": h, "mlp_mid": mid * routed}
    for tensor, names in feeds.items():
        kept = 0
        if not copy_bytes and any(n in trainable and (full or not in_mlp_experts(n)) for n in names):
            kept = act_bytes
        if quantized_input_bytes:
            kept = max(kept, quantized_input_bytes)
        total += kept * width[tensor]
    if s.qk_norm:
        total += k["norm_saved_bytes"] * (q + kv)
    repeat_kv = attention == "eager" or (
        attention == "sdpa" and micro_batch > 1 and k["sdpa_repeats_kv_with_padding"]
    )
    kv_saved = q if repeat_kv else kv
    total += act_bytes * (q + 2 * kv_saved + q)  # rotated q, k, v and the attention output
    if attention == "eager":
        total += k["eager_attention_bytes_per_score"] * s.heads * seq_len  # heads x s x s per sequence
    if s.experts:
        total += s.experts_per_token * 3 * act_bytes * s.expert_width  # gate, activation, up per routed expert
        if s.shared_width:
            total += 3 * act_bytes * s.shared_width
        total += 4 * s.experts  # fp32 router softmax
    elif s.gated:
        total += 3 * act_bytes * mid  # gate output, activation output, up output
    else:
        total += act_bytes * mid  # fc1 output kept by the activation (fc2's input is counted above)
    return total


def _eval_layer_bytes_per_token(s: _Shape) -> float:
    """Transient bytes per token while one layer runs without grad (fp32 norm, MLP intermediates)."""
    mid = s.expert_width * s.experts_per_token if s.experts else s.intermediate
    return 4.0 * s.hidden + 2.0 * s.hidden + 2.0 * 3 * mid


def estimate(
    config: ConfigFacts,
    model: ModelFacts,
    *,
    data: DataFacts | None = None,
    longest_tokens: int | None = None,
    gpu_total_mib: float | None = None,
    calibration: Any = None,
) -> Estimate:
    """Per-term and per-phase peak allocated memory of one GPU, and the band nvidia-smi should show.

    ``calibration`` (``estimate.calibrate.Calibration``) replaces the stack-dependent constants with values
    fitted to a trial of the same setting; the result says so in ``calibration``."""
    k = constants() if calibration is None else calibration.memory_model(constants())
    notes = _Notes()
    s = _shape(model)
    stage = (config.stage or "sft").lower()
    method = (config.finetuning_type or "lora").lower()
    precision = config.precision or "fp32"
    amp = precision in ("fp16", "bf16")
    pure = precision == "pure_bf16"
    world = max(1, int(config.world_size or 1))
    zero = int(config.zero_stage) if config.deepspeed and config.zero_stage else 0

    # ---- lengths: the worst batch is padded to its longest sample, rounded up to a multiple of 8
    pad = int(k["pad_to_multiple_of"])
    longest = longest_tokens if longest_tokens else (data.max_tokens if data is not None else None)
    if config.packing:
        padded_len, padded_source = int(config.cutoff_len), "cutoff_len"
        notes.add("est_note_packing", cutoff=config.cutoff_len)
    elif longest:
        padded_len = round_up(min(int(longest), int(config.cutoff_len)), pad)
        padded_source = "longest_sample"
    else:
        padded_len, padded_source = round_up(int(config.cutoff_len), pad), "cutoff_len"
        notes.add("est_note_cutoff_len", cutoff=config.cutoff_len)
    seqs_per_sample = int(k["sequences_per_sample"].get(stage, k["sequences_per_sample"]["default"]))
    micro_batch = int(config.per_device_train_batch_size)
    sequences = micro_batch * seqs_per_sample
    tokens = sequences * padded_len
    if seqs_per_sample > 1:
        notes.add("est_note_pairs", stage=stage)
    if stage == "ppo":
        notes.add("est_note_ppo")

    eval_batch = int(config.per_device_eval_batch_size)
    eval_len = padded_len
    if data is not None and data.eval_max_tokens:
        eval_len = round_up(min(int(data.eval_max_tokens), int(config.cutoff_len)), pad)
    elif config.do_eval:
        notes.add("est_note_eval_len", length=eval_len)
    eval_tokens = eval_batch * seqs_per_sample * eval_len

    # ---- parameters
    trainable_set, unknown_targets = lora_targets(config.lora_target)
    if unknown_targets:
        notes.add("est_note_unknown_targets", names=", ".join(unknown_targets))
    dims = s.linear_dims()
    body_params = s.params - s.embedding_params
    if method == "lora":
        per_layer = sum(
            config.lora_rank * (dims[name][0] + dims[name][1])
            for name in trainable_set
            if not (s.experts and name in ("gate", "up", "down"))
        )
        if s.experts and trainable_set & {"gate", "up", "down"}:
            notes.add("est_note_moe_lora")
        trainable_params = per_layer * s.layers
    elif method == "freeze":
        trainable_params = int(body_params / max(1, s.layers) * min(2, s.layers))
        notes.add("est_note_freeze")
    else:
        trainable_params = s.params

    weight_bytes_16 = float(k["base_weight_bytes"])
    trainable_bytes = float(k["trainable_weight_bytes"]["pure_bf16" if pure else "upcast"])
    quant_bit = config.quantization_bit
    if quant_bit and method != "full":
        qk = k["quantized_linear_bytes"]
        if (config.quantization_method or "bnb").lower() == "bnb" and int(quant_bit) in qk["bnb"]:
            per = qk["bnb"][int(quant_bit)]["double" if config.double_quantization else "single"]
        else:
            per = int(quant_bit) / 8.0 * float(qk["other_overhead"])
        norm_params = s.layers * s.norms * s.hidden
        linear_params = max(0, body_params - norm_params)
        frozen_bytes = linear_params * per + (s.embedding_params + norm_params) * weight_bytes_16
    else:
        frozen_bytes = (s.params - (trainable_params if method != "lora" else 0)) * weight_bytes_16

    opt = (config.optim or "adamw_torch").lower()
    if opt in k["optimizer_state_bytes_8bit"]:
        opt_state_per_param = float(k["optimizer_state_bytes_8bit"][opt])
    else:
        factors = k["optimizer_state_factor"]
        if opt not in factors:
            notes.add("est_note_unknown_optim", optim=opt)
        opt_state_per_param = float(factors.get(opt, factors["default"])) * trainable_bytes
    step_temp_per_param = float(k["optimizer_step_temp_factor"].get(opt, k["optimizer_step_temp_factor"]["default"])) * trainable_bytes

    if zero:
        ds = k["deepspeed"]
        shard_weights = world if zero >= 3 else 1
        if method == "lora":
            weights_b = frozen_bytes / shard_weights + trainable_params * trainable_bytes / shard_weights
            grads_b = trainable_params * trainable_bytes / (world if zero >= 2 else 1)
            optim_b = trainable_params * opt_state_per_param / world
        else:
            weights_b = frozen_bytes / shard_weights + trainable_params * float(ds["weight_bytes"]) / shard_weights
            grads_b = trainable_params * float(ds["grad_bytes"]) / (world if zero >= 2 else 1)
            optim_b = trainable_params * (float(ds["master_bytes"]) + opt_state_per_param) / world
        if config.offload_param and zero >= 3:
            weights_b = 0.0
            notes.add("est_note_offload_param")
        if config.offload_optimizer:
            optim_b = 0.0
            notes.add("est_note_offload_optimizer")
        amp_copies_b = 0.0
        step_temp_b = 0.0 if config.offload_optimizer else trainable_params * step_temp_per_param / world
    else:
        weights_b = frozen_bytes + trainable_params * trainable_bytes
        grads_b = trainable_params * trainable_bytes
        if world > 1:
            grads_b *= 2  # DDP gradient buckets hold a second copy
        optim_b = trainable_params * opt_state_per_param
        amp_copies_b = trainable_params * float(k["amp_weight_copy_bytes"]) if (amp and method != "lora") else 0.0
        step_temp_b = trainable_params * step_temp_per_param
        if config.offload_optimizer or config.offload_param:
            notes.add("est_note_offload_without_zero")
    if stage in ("dpo", "kto") and method != "lora":
        weights_b += s.params * weight_bytes_16 / (world if zero >= 3 else 1)  # the frozen reference model
        notes.add("est_note_reference_model")

    # ---- activations
    attention = _attention_impl(config, model, notes)
    full = method in ("full", "freeze")
    act_bytes = int(k["activation_bytes"]["fp32" if (full and precision == "fp32") else "half"])
    # Per-linear input copies. LoRA under AMP: autocast's 16-bit copy; fp32 adapters without AMP: PEFT's fp32
    # copy; pure bf16: none. Full fine-tuning under AMP: autocast's copy of each linear's input.
    lora_copy_bytes = 0 if pure else (2 if amp else 4)
    if method == "lora" and lora_dropout(config) > 0:
        # LoRA dropout gives each adapted linear its own dropped-out input (kept by lora_A, in the adapter's
        # compute dtype) and a boolean mask: a pure-bf16 adapter no longer shares the layer's input.
        lora_copy_bytes = (lora_copy_bytes or act_bytes) + int(k["dropout_mask_bytes"])
        notes.add("est_note_lora_dropout", dropout=lora_dropout(config))
    copy_bytes = lora_copy_bytes if method == "lora" else (2 if amp else 0)
    quantized_input_bytes = 0
    if quant_bit and method != "full":
        quantized_input_bytes = 1 if int(quant_bit) == 8 else act_bytes
    norm_weight_bytes = (4 if amp else act_bytes) if full else 0
    layer_trainable = trainable_set if method == "lora" else set(_ALL_LINEARS)
    per_layer_token = _layer_bytes_per_token(
        s,
        seq_len=padded_len,
        micro_batch=micro_batch,
        attention=attention,
        trainable=layer_trainable,
        full=full,
        act_bytes=act_bytes,
        copy_bytes=copy_bytes,
        quantized_input_bytes=quantized_input_bytes,
        norm_weight_bytes=norm_weight_bytes,
        k=k,
    )
    layer_b = per_layer_token * tokens
    if config.gradient_checkpointing:
        stored_b = float(k["checkpoint_bytes_per_token_hidden"]) * s.hidden * s.layers * tokens
        if act_bytes == 4:
            stored_b *= 2
    else:
        stored_b = layer_b * s.layers

    if config.enable_liger_kernel:
        loss_b = float(k["liger_bytes_per_token_hidden"]) * s.hidden * tokens
        notes.add("est_note_liger")
    else:
        loss_b = float(k["logits_train_bytes"]) * tokens * s.vocab
    scale = float(k["activation_scale"])  # 1 from the accounting; a calibration fits it
    stored_b, layer_b, loss_b = stored_b * scale, layer_b * scale, loss_b * scale
    # With checkpointing one layer is recomputed in backward, after the loss buffers are gone: it only adds
    # to the peak where it is bigger than the logits/loss term.
    activations_b = stored_b + max(0.0, layer_b - loss_b) if config.gradient_checkpointing else stored_b

    misc_b = float(k["misc_allocated_mib"]) * MIB
    trainable_state_b = grads_b + optim_b + amp_copies_b
    # The Trainer sets gradients to None after every optimizer step. They are held through the forward pass
    # only while they accumulate over micro-batches, or when DDP buckets / ZeRO partitions keep them.
    grads_held = bool(zero) or world > 1 or int(config.gradient_accumulation_steps) > 1
    forward_state_b = trainable_state_b if grads_held else trainable_state_b - grads_b
    if not grads_held and method != "lora":
        notes.add("est_note_grads_freed")
    train_b = weights_b + forward_state_b + activations_b + loss_b + misc_b
    step_b = weights_b + trainable_state_b + step_temp_b + misc_b
    train_peak_b = max(train_b, step_b)

    # ---- eval: forward only, logits of the eval batch; gradients are freed, optimizer state stays
    if config.do_eval:
        eval_extra_b = float(k["logits_eval_bytes"]) * eval_tokens * s.vocab + _eval_layer_bytes_per_token(s) * eval_tokens
        eval_extra_b *= float(k.get("eval_activation_scale", scale))
        eval_peak_b = weights_b + optim_b + eval_extra_b + misc_b  # autocast caches no weights without grad
    else:
        eval_extra_b = 0.0
        eval_peak_b = 0.0
        notes.add("est_note_no_eval")

    # ---- load: the weights plus the biggest 16-bit tensor in flight (the embedding matrix)
    load_b = weights_b + s.vocab * s.hidden * weight_bytes_16

    phases = {"load": load_b / MIB, "train": train_peak_b / MIB, "eval": eval_peak_b / MIB}
    terms = {
        "weights": weights_b / MIB,
        "trainable_state": trainable_state_b / MIB,
        "activations": activations_b / MIB,
        "logits_loss": loss_b / MIB,
        "eval": eval_extra_b / MIB,
        "overhead": misc_b / MIB,
    }
    peak_b = max(load_b, train_peak_b, eval_peak_b)
    train_terms = {key: terms[key] for key in ("weights", "trainable_state", "activations", "logits_loss", "overhead")}
    dominant = max(train_terms, key=lambda key: train_terms[key])

    # ---- what nvidia-smi shows: reserved (allocator) + CUDA context
    # Persistent state (weights, gradients, optimizer state) is allocated once per tensor and cached tight;
    # only what comes and goes every step is inflated. With fixed shapes that is the fixed-shape factor. With
    # variable lengths the stored activations are cached at their largest size, while the big per-step buffers
    # (logits and loss, the recomputed layer, the eval batch) change size with every batch and creep.
    ctx_low, ctx_high = (float(v) for v in k["cuda_context_mib"])
    low_factor, high_factor = (float(v) for v in k["fixed_shape_reserve"])
    variable_lengths = not config.packing
    static_b = weights_b + trainable_state_b + misc_b
    transient_b = max(0.0, peak_b - static_b)
    reserved_low_b = peak_b * low_factor
    reserved_high_b = static_b + transient_b * high_factor
    if variable_lengths:
        eval_working_b = max(0.0, eval_peak_b - (weights_b + optim_b + misc_b)) if config.do_eval else 0.0
        working_b = max(0.0, train_peak_b - static_b) + eval_working_b
        stored_kept_b = min(stored_b, working_b)
        creep_b = stored_kept_b * high_factor + float(k["variable_length_creep"]) * (working_b - stored_kept_b)
        reserved_high_b = max(reserved_high_b, static_b + creep_b)
        notes.add("est_note_creep", creep=k["variable_length_creep"])
    smi_low = reserved_low_b / MIB + ctx_low
    smi_high = reserved_high_b / MIB + ctx_high

    fits = headroom = allocated_fits = fills_card = None
    on_card: tuple[float, float] | None = None
    if gpu_total_mib:
        fits = smi_high <= gpu_total_mib
        headroom = gpu_total_mib - smi_high
        allocated_fits = peak_b / MIB + ctx_low <= gpu_total_mib
        # nvidia-smi never shows more than the card: past it the allocator frees its cache and retries.
        fills_card = smi_high > gpu_total_mib
        on_card = (round(min(smi_low, gpu_total_mib), 1), round(min(smi_high, gpu_total_mib), 1))
        if fits is False and allocated_fits:
            notes.add("est_note_tight", total=round(gpu_total_mib))
    if world > 1:
        notes.add("est_note_per_gpu", gpus=world)

    rendered = notes.rendered()
    return Estimate(
        peak_allocated_mib=round(peak_b / MIB, 1),
        expected_nvidia_smi_mib=(round(smi_low, 1), round(smi_high, 1)),
        phases={key: round(value, 1) for key, value in phases.items()},
        terms={key: round(value, 1) for key, value in terms.items()},
        dominant_term=dominant,
        padded_len=padded_len,
        padded_len_source=padded_source,
        micro_batch=micro_batch,
        eval_batch=eval_batch,
        gpu_total_mib=gpu_total_mib,
        fits=fits,
        headroom_mib=round(headroom, 1) if headroom is not None else None,
        model_source=model.source,
        assumptions=[note["en"] for note in rendered],
        notes=rendered,
        eval_len=eval_len if config.do_eval else None,
        allocated_fits=allocated_fits,
        variable_lengths=variable_lengths,
        attention=attention,
        trainable_params=int(trainable_params),
        tokens_per_micro_batch=int(tokens),
        expected_reserved_mib=(round(reserved_low_b / MIB, 1), round(reserved_high_b / MIB, 1)),
        fills_card=fills_card,
        expected_nvidia_smi_on_card_mib=on_card,
        calibration=calibration.describe() if calibration is not None else None,
    )
