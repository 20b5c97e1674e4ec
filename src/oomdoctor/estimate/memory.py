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
from functools import lru_cache
from pathlib import Path
from typing import Any

from oomdoctor.datafiles import load_data_mapping
from oomdoctor.errors import BadInput
from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.types import ConfigFacts, DataFacts, ModelFacts
from oomdoctor.i18n import both, msg
from oomdoctor.records import field, record
from oomdoctor.text import Text

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
    return load_data_mapping(_MODEL_PATH)


def liger_fuses_loss(stage: str | None) -> bool:
    """LLaMA-Factory lets Liger fuse this stage's loss (``liger_fused_loss_stages``): pt and sft; for the others
    it passes require_logits and the trainer builds the full logits."""
    return (stage or "sft").lower() in constants()["liger_fused_loss_stages"]


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


@record
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


@record
class _Notes:
    """Assumptions collected while estimating, as message keys rendered in both languages."""

    keys: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, key: str, **fields: Any) -> None:
        if (key, fields) not in self.keys:
            self.keys.append((key, fields))

    def rendered(self) -> list[Text]:
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
    """Bytes autograd saves per token in one decoder layer without checkpointing: the norms, the linears'
    inputs, the attention and the MLP.

    Checked against autograd's saved tensors for HF Llama/Qwen3 + PEFT on CPU: within about 7 %
    (benchmarks/bench_estimate.py --activations).
    """
    total = float(s.norms * k["norm_saved_bytes"] * s.hidden)
    total += s.norms * norm_weight_bytes * s.hidden  # trainable norm weights keep their normalised input
    total += _linear_inputs_saved(
        s,
        trainable=trainable,
        full=full,
        act_bytes=act_bytes,
        copy_bytes=copy_bytes,
        quantized_input_bytes=quantized_input_bytes,
    )
    total += _attention_saved(
        s, seq_len=seq_len, micro_batch=micro_batch, attention=attention, act_bytes=act_bytes, k=k
    )
    return total + _mlp_saved(s, act_bytes)


def _linear_inputs_saved(
    s: _Shape, *, trainable: set[str], full: bool, act_bytes: int, copy_bytes: int, quantized_input_bytes: int
) -> float:
    """Bytes per token the linears keep of their inputs.

    A frozen 16-bit linear saves nothing (its input is only needed for a weight gradient). A linear whose
    input is cast on the way in (LoRA under AMP or fp32 adapters: PEFT casts to the adapter's dtype and
    autocast casts back; full fine-tuning under AMP) holds its own copy, ``copy_bytes`` per input feature.
    Otherwise each distinct input tensor is kept once: by trainable linears (pure bf16 LoRA, full
    fine-tuning) and by bitsandbytes' quantised matmul, which keeps its input whenever that input needs a
    gradient.
    """
    dims = s.linear_dims()
    routed = s.experts_per_token if s.experts else 1

    def in_mlp_experts(name: str) -> bool:
        return bool(s.experts) and name in ("gate", "up", "down")

    total = 0.0
    if copy_bytes:  # per-linear copies
        total += sum(
            copy_bytes * dims[name][0] * (routed if in_mlp_experts(name) else 1)
            for name in trainable
            if not (in_mlp_experts(name) and not full)
        )
    # distinct inputs kept once
    mid = s.expert_width if s.experts else s.intermediate
    feeds = {"attn_in": ("q", "k", "v"), "attn_out": ("o",), "mlp_in": ("gate", "up"), "mlp_mid": ("down",)}
    width = {"attn_in": s.hidden, "attn_out": s.q_dim, "mlp_in": s.hidden, "mlp_mid": mid * routed}
    for tensor, names in feeds.items():
        kept = 0
        if not copy_bytes and any(n in trainable and (full or not in_mlp_experts(n)) for n in names):
            kept = act_bytes
        if quantized_input_bytes:
            kept = max(kept, quantized_input_bytes)
        total += kept * width[tensor]
    return total


def _attention_saved(
    s: _Shape, *, seq_len: int, micro_batch: int, attention: str, act_bytes: int, k: dict[str, Any]
) -> float:
    """Bytes per token attention keeps: q/k norms, rotated q, k, v and the output, and eager's scores."""
    q, kv = s.q_dim, s.kv_dim
    total = 0.0
    if s.qk_norm:
        total += k["norm_saved_bytes"] * (q + kv)
    repeat_kv = attention == "eager" or (
        attention == "sdpa" and micro_batch > 1 and k["sdpa_repeats_kv_with_padding"]
    )
    kv_saved = q if repeat_kv else kv
    total += act_bytes * (q + 2 * kv_saved + q)  # rotated q, k, v and the attention output
    if attention == "eager":
        total += k["eager_attention_bytes_per_score"] * s.heads * seq_len  # heads x s x s per sequence
    return total


def _mlp_saved(s: _Shape, act_bytes: int) -> float:
    """Bytes per token the MLP keeps beyond its linears' inputs: the gate, activation and up outputs (per
    routed expert, and the router's fp32 softmax, in a mixture of experts)."""
    if s.experts:
        total = float(s.experts_per_token * 3 * act_bytes * s.expert_width)  # gate, activation, up per expert
        if s.shared_width:
            total += 3 * act_bytes * s.shared_width
        return total + 4 * s.experts  # fp32 router softmax
    if s.gated:
        return float(3 * act_bytes * s.intermediate)  # gate output, activation output, up output
    return float(
        act_bytes * s.intermediate
    )  # fc1 output kept by the activation (fc2's input is counted above)


def _eval_layer_bytes_per_token(s: _Shape) -> float:
    """Transient bytes per token while one layer runs without grad (fp32 norm, MLP intermediates)."""
    mid = s.expert_width * s.experts_per_token if s.experts else s.intermediate
    return 4.0 * s.hidden + 2.0 * s.hidden + 2.0 * 3 * mid


@record(slots=True)
class _Setting:
    """What every term reads: the config, the model's shape, the constants and the run's kind."""

    config: ConfigFacts
    model: ModelFacts
    s: _Shape
    k: dict[str, Any]
    notes: _Notes
    stage: str
    method: str  # lora / freeze / full
    precision: str
    world: int
    zero: int  # the ZeRO stage in effect (0: none)
    shard: int  # the stage the held state is sharded as: ZeRO's, else FSDP's strategy as a ZeRO stage
    amp: bool  # fp16 / bf16 autocast
    pure: bool  # pure bf16
    full: bool  # every linear trains (full or freeze)
    quant_bit: int | None  # the frozen base is quantised to this many bits


def _setting(config: ConfigFacts, model: ModelFacts, k: dict[str, Any]) -> _Setting:
    from oomdoctor.facts.config import fsdp_shard_stage

    method = (config.finetuning_type or "lora").lower()
    precision = config.precision or "fp32"
    bit = config.quantization_bit
    zero = int(config.zero_stage) if config.deepspeed and config.zero_stage else 0
    return _Setting(
        config=config,
        model=model,
        s=_shape(model),
        k=k,
        notes=_Notes(),
        stage=(config.stage or "sft").lower(),
        method=method,
        precision=precision,
        world=max(1, int(config.world_size or 1)),
        zero=zero,
        shard=zero or fsdp_shard_stage(config),
        amp=precision in ("fp16", "bf16"),
        pure=precision == "pure_bf16",
        full=method in ("full", "freeze"),
        quant_bit=int(bit) if bit and method != "full" else None,
    )


@record(slots=True)
class _Lengths:
    """The sequence lengths the estimate pads to, and where each comes from."""

    padded_len: int
    padded_source: str
    micro_batch: int
    seqs_per_sample: int
    tokens: int  # in one training micro-batch
    eval_batch: int
    eval_len: int
    eval_tokens: int


def _lengths(st: _Setting, data: DataFacts | None, longest_tokens: int | None) -> _Lengths:
    """The worst batch is padded to its longest sample, rounded up to a multiple of 8."""
    config, k, notes = st.config, st.k, st.notes
    pad = int(k["pad_to_multiple_of"])
    longest = longest_tokens if longest_tokens else (data.max_tokens if data is not None else None)
    if config.packing:
        padded_len, padded_source = int(config.cutoff_len), "cutoff_len"
        notes.add("est_note_packing", cutoff=config.cutoff_len)
    elif longest:
        padded_len, padded_source = round_up(min(int(longest), int(config.cutoff_len)), pad), "longest_sample"
    else:
        padded_len, padded_source = round_up(int(config.cutoff_len), pad), "cutoff_len"
        notes.add("est_note_cutoff_len", cutoff=config.cutoff_len)
    seqs_per_sample = int(k["sequences_per_sample"].get(st.stage, k["sequences_per_sample"]["default"]))
    micro_batch = int(config.per_device_train_batch_size)
    if seqs_per_sample > 1:
        notes.add("est_note_pairs", stage=st.stage)
    if st.stage == "ppo":
        notes.add("est_note_ppo")
    eval_batch = int(config.per_device_eval_batch_size)
    eval_len = padded_len
    if data is not None and data.eval_max_tokens:
        eval_len = round_up(min(int(data.eval_max_tokens), int(config.cutoff_len)), pad)
    elif config.do_eval:
        notes.add("est_note_eval_len", length=eval_len)
    return _Lengths(
        padded_len=padded_len,
        padded_source=padded_source,
        micro_batch=micro_batch,
        seqs_per_sample=seqs_per_sample,
        tokens=micro_batch * seqs_per_sample * padded_len,
        eval_batch=eval_batch,
        eval_len=eval_len,
        eval_tokens=eval_batch * seqs_per_sample * eval_len,
    )


def _trainable(st: _Setting) -> tuple[set[str], int]:
    """(the block linears LoRA adapts, the parameters that train)."""
    s, config, notes = st.s, st.config, st.notes
    trainable_set, unknown_targets = lora_targets(config.lora_target)
    if unknown_targets:
        notes.add("est_note_unknown_targets", names=", ".join(unknown_targets))
    if st.method == "lora":
        dims = s.linear_dims()
        per_layer = sum(
            config.lora_rank * (dims[name][0] + dims[name][1])
            for name in trainable_set
            if not (s.experts and name in ("gate", "up", "down"))
        )
        if s.experts and trainable_set & {"gate", "up", "down"}:
            notes.add("est_note_moe_lora")
        return trainable_set, per_layer * s.layers
    if st.method == "freeze":
        notes.add("est_note_freeze")
        return trainable_set, int((s.params - s.embedding_params) / max(1, s.layers) * min(2, s.layers))
    return trainable_set, s.params


def _trainable_bytes(st: _Setting) -> float:
    return float(st.k["trainable_weight_bytes"]["pure_bf16" if st.pure else "upcast"])


def _frozen_bytes(st: _Setting, trainable_params: int) -> float:
    """The weights that do not train, as stored: 16-bit, or quantised linears beside 16-bit embeddings/norms."""
    s, k, config = st.s, st.k, st.config
    weight_bytes_16 = float(k["base_weight_bytes"])
    if st.quant_bit is None:
        return (s.params - (trainable_params if st.method != "lora" else 0)) * weight_bytes_16
    qk = k["quantized_linear_bytes"]
    if (config.quantization_method or "bnb").lower() == "bnb" and st.quant_bit in qk["bnb"]:
        per = qk["bnb"][st.quant_bit]["double" if config.double_quantization else "single"]
    else:
        per = st.quant_bit / 8.0 * float(qk["other_overhead"])
    norm_params = s.layers * s.norms * s.hidden
    linear_params = max(0, s.params - s.embedding_params - norm_params)
    return float(linear_params * per + (s.embedding_params + norm_params) * weight_bytes_16)


def _optimizer_bytes(st: _Setting) -> tuple[float, float]:
    """(optimizer state, optimizer-step temporaries) per trained parameter."""
    k, trainable_bytes = st.k, _trainable_bytes(st)
    opt = (st.config.optim or "adamw_torch").lower()
    if opt in k["optimizer_state_bytes_8bit"]:
        state = float(k["optimizer_state_bytes_8bit"][opt])
    else:
        factors = k["optimizer_state_factor"]
        if opt not in factors:
            st.notes.add("est_note_unknown_optim", optim=opt)
        state = float(factors.get(opt, factors["default"])) * trainable_bytes
    temps = k["optimizer_step_temp_factor"]
    return state, float(temps.get(opt, temps["default"])) * trainable_bytes


@record(slots=True)
class _State:
    """Bytes held by parameters and their training state on one GPU."""

    weights: float
    grads: float
    optim: float
    amp_copies: float
    step_temp: float

    @property
    def trainable_state(self) -> float:
        return self.grads + self.optim + self.amp_copies


def _state(st: _Setting, trainable_params: int) -> _State:
    frozen = _frozen_bytes(st, trainable_params)
    opt_state, step_temp = _optimizer_bytes(st)
    state = _zero_state if st.shard else _plain_state
    held = state(st, trainable_params, frozen, opt_state, step_temp)
    if st.stage in ("dpo", "kto") and st.method != "lora":
        reference = st.s.params * float(st.k["base_weight_bytes"]) / (st.world if st.shard >= 3 else 1)
        st.notes.add("est_note_reference_model")
        held.weights += reference  # the frozen reference model
    return held


def _zero_state(st: _Setting, trainable: int, frozen: float, opt_state: float, step_temp: float) -> _State:
    """ZeRO shards optimizer state (stage 1+), gradients (2+) and weights (3) over the processes; FSDP's
    full_shard / shard_grad_op shard the same state as stages 3 / 2 (``st.shard``)."""
    config, ds, world, zero = st.config, st.k["deepspeed"], st.world, st.shard
    shard_weights = world if zero >= 3 else 1
    shard_grads = world if zero >= 2 else 1
    if st.method == "lora":
        trainable_bytes = _trainable_bytes(st)
        weights = frozen / shard_weights + trainable * trainable_bytes / shard_weights
        grads = trainable * trainable_bytes / shard_grads
        optim = trainable * opt_state / world
    else:
        weights = frozen / shard_weights + trainable * float(ds["weight_bytes"]) / shard_weights
        grads = trainable * float(ds["grad_bytes"]) / shard_grads
        optim = trainable * (float(ds["master_bytes"]) + opt_state) / world
    if config.offload_param and zero >= 3:
        weights = 0.0
        st.notes.add("est_note_offload_param")
    if config.offload_optimizer:
        optim = 0.0
        st.notes.add("est_note_offload_optimizer")
    temp = 0.0 if config.offload_optimizer else trainable * step_temp / world
    return _State(weights=weights, grads=grads, optim=optim, amp_copies=0.0, step_temp=temp)


def _plain_state(st: _Setting, trainable: int, frozen: float, opt_state: float, step_temp: float) -> _State:
    """Every process holds everything; DDP gradient buckets hold a second copy of the gradients."""
    trainable_bytes = _trainable_bytes(st)
    grads = trainable * trainable_bytes * (2 if st.world > 1 else 1)
    amp_copies = trainable * float(st.k["amp_weight_copy_bytes"]) if (st.amp and st.method != "lora") else 0.0
    if st.config.offload_optimizer or st.config.offload_param:
        st.notes.add("est_note_offload_without_zero")
    return _State(
        weights=frozen + trainable * trainable_bytes,
        grads=grads,
        optim=trainable * opt_state,
        amp_copies=amp_copies,
        step_temp=trainable * step_temp,
    )


@record(slots=True)
class _Activations:
    """Activation memory per term, in MiB."""

    attention: str
    stored: float  # kept for backward (checkpoints, or every layer's saved tensors)
    layer: float  # one layer's saved tensors (recomputed in backward under checkpointing)
    loss: float  # logits and loss
    total: float  # what the peak holds besides the loss


def _copy_bytes(st: _Setting, act_bytes: int) -> int:
    """Per-linear input copies. LoRA under AMP: autocast's 16-bit copy; fp32 adapters without AMP: PEFT's fp32
    copy; pure bf16: none. Full fine-tuning under AMP: autocast's copy of each linear's input."""
    if st.method != "lora":
        return 2 if st.amp else 0
    lora_copy = 0 if st.pure else (2 if st.amp else 4)
    dropout = lora_dropout(st.config)
    if dropout > 0:
        # LoRA dropout gives each adapted linear its own dropped-out input (kept by lora_A, in the adapter's
        # compute dtype) and a boolean mask: a pure-bf16 adapter no longer shares the layer's input.
        lora_copy = (lora_copy or act_bytes) + int(st.k["dropout_mask_bytes"])
        st.notes.add("est_note_lora_dropout", dropout=dropout)
    return lora_copy


def _activations(st: _Setting, lengths: _Lengths, trainable_set: set[str]) -> _Activations:
    config, k, s = st.config, st.k, st.s
    attention = _attention_impl(config, st.model, st.notes)
    act_bytes = int(k["activation_bytes"]["fp32" if (st.full and st.precision == "fp32") else "half"])
    copy_bytes = _copy_bytes(st, act_bytes)
    quantized_input_bytes = 0 if st.quant_bit is None else (1 if st.quant_bit == 8 else act_bytes)
    layer_b = lengths.tokens * _layer_bytes_per_token(
        s,
        seq_len=lengths.padded_len,
        micro_batch=lengths.micro_batch,
        attention=attention,
        trainable=trainable_set if st.method == "lora" else set(_ALL_LINEARS),
        full=st.full,
        act_bytes=act_bytes,
        copy_bytes=copy_bytes,
        quantized_input_bytes=quantized_input_bytes,
        norm_weight_bytes=(4 if st.amp else act_bytes) if st.full else 0,
        k=k,
    )
    if config.gradient_checkpointing:
        stored_b = float(k["checkpoint_bytes_per_token_hidden"]) * s.hidden * s.layers * lengths.tokens
        stored_b *= 2 if act_bytes == 4 else 1
    else:
        stored_b = layer_b * s.layers
    if config.enable_liger_kernel and liger_fuses_loss(st.stage):
        loss_b = float(k["liger_bytes_per_token_hidden"]) * s.hidden * lengths.tokens
        st.notes.add("est_note_liger")
    else:
        loss_b = float(k["logits_train_bytes"]) * lengths.tokens * s.vocab
    scale = float(k["activation_scale"])  # 1 from the accounting; a calibration fits it
    stored_b, layer_b, loss_b = stored_b * scale, layer_b * scale, loss_b * scale
    # With checkpointing one layer is recomputed in backward, after the loss buffers are gone: it only adds
    # to the peak where it is bigger than the logits/loss term.
    total = stored_b + max(0.0, layer_b - loss_b) if config.gradient_checkpointing else stored_b
    return _Activations(attention=attention, stored=stored_b, layer=layer_b, loss=loss_b, total=total)


@record(slots=True)
class _Peaks:
    """The peak of each phase, in MiB."""

    misc: float
    train: float  # the training phase: max(forward/backward, optimizer step)
    eval_extra: float
    eval: float
    load: float

    @property
    def peak(self) -> float:
        return max(self.load, self.train, self.eval)


def _peaks(st: _Setting, lengths: _Lengths, held: _State, act: _Activations) -> _Peaks:
    config, k, s = st.config, st.k, st.s
    misc_b = float(k["misc_allocated_mib"]) * MIB
    # The Trainer sets gradients to None after every optimizer step. They are held through the forward pass
    # only while they accumulate over micro-batches, or when DDP buckets / ZeRO partitions keep them.
    grads_held = bool(st.zero) or st.world > 1 or int(config.gradient_accumulation_steps) > 1
    forward_state_b = held.trainable_state if grads_held else held.trainable_state - held.grads
    if not grads_held and st.method != "lora":
        st.notes.add("est_note_grads_freed")
    train_b = held.weights + forward_state_b + act.total + act.loss + misc_b
    step_b = held.weights + held.trainable_state + held.step_temp + misc_b
    # eval: forward only, logits of the eval batch; gradients are freed, optimizer state stays
    if config.do_eval:
        tokens = lengths.eval_tokens
        eval_extra_b = (
            float(k["logits_eval_bytes"]) * tokens * s.vocab + _eval_layer_bytes_per_token(s) * tokens
        )
        eval_extra_b *= float(k.get("eval_activation_scale", k["activation_scale"]))
        eval_extra_b += _vision_eval_bytes(st, lengths, act.attention)
        eval_peak_b = (
            held.weights + held.optim + eval_extra_b + misc_b
        )  # autocast caches no weights without grad
    else:
        eval_extra_b = eval_peak_b = 0.0
        st.notes.add("est_note_no_eval")
    # load: the weights plus the biggest 16-bit tensor in flight (the embedding matrix)
    load_b = held.weights + s.vocab * s.hidden * float(k["base_weight_bytes"])
    return _Peaks(
        misc=misc_b, train=max(train_b, step_b), eval_extra=eval_extra_b, eval=eval_peak_b, load=load_b
    )


def _vision_eval_bytes(st: _Setting, lengths: _Lengths, attention: str) -> float:
    """A multimodal run's vision tower during evaluation: one layer's transient over one image a sample of the
    eval batch at the config's pixel limit (estimate/vision.py); 0 for a text model."""
    from oomdoctor.estimate.vision import tower_eval_bytes, vision_tokens

    vt = vision_tokens(st.config, st.model)
    if vt is None:
        return 0.0
    tower_b = tower_eval_bytes(vt, attention, lengths.eval_batch)
    st.notes.add(
        "est_note_vision_eval", mib=round(tower_b / MIB), limit=vt.pixels_key, pixels=vt.image_pixels,
        batch=lengths.eval_batch,
    )  # fmt: skip
    return tower_b


def _reserved(st: _Setting, held: _State, act: _Activations, peaks: _Peaks) -> tuple[float, float]:
    """(low, high) bytes the caching allocator reserves.

    Persistent state (weights, gradients, optimizer state) is allocated once per tensor and cached tight;
    only what comes and goes every step is inflated. With fixed shapes that is the fixed-shape factor. With
    variable lengths the stored activations are cached at their largest size, while the big per-step buffers
    (logits and loss, the recomputed layer, the eval batch) change size with every batch and creep."""
    k, config = st.k, st.config
    low_factor, high_factor = (float(v) for v in k["fixed_shape_reserve"])
    static_b = held.weights + held.trainable_state + peaks.misc
    reserved_low_b = peaks.peak * low_factor
    reserved_high_b = static_b + max(0.0, peaks.peak - static_b) * high_factor
    if not config.packing:  # variable lengths
        eval_working_b = (
            max(0.0, peaks.eval - (held.weights + held.optim + peaks.misc)) if config.do_eval else 0.0
        )
        working_b = max(0.0, peaks.train - static_b) + eval_working_b
        stored_kept_b = min(act.stored, working_b)
        creep_b = stored_kept_b * high_factor + float(k["variable_length_creep"]) * (
            working_b - stored_kept_b
        )
        reserved_high_b = max(reserved_high_b, static_b + creep_b)
        st.notes.add("est_note_creep", creep=k["variable_length_creep"])
    return reserved_low_b, reserved_high_b


@record(slots=True)
class _Fit:
    """Whether the peak fits the card, and by how much."""

    fits: bool | None = None
    headroom: float | None = None
    allocated_fits: bool | None = None
    fills_card: bool | None = None
    on_card: tuple[float, float] | None = None


def _fit(st: _Setting, peak_b: float, smi: tuple[float, float], gpu_total_mib: float | None) -> _Fit:
    """Whether the nvidia-smi band and the allocated peak fit the card. nvidia-smi never shows more than the
    card: past it the allocator frees its cache and retries."""
    if not gpu_total_mib:
        return _Fit()
    smi_low, smi_high = smi
    ctx_low = float(st.k["cuda_context_mib"][0])
    fit = _Fit(
        fits=smi_high <= gpu_total_mib,
        headroom=gpu_total_mib - smi_high,
        allocated_fits=peak_b / MIB + ctx_low <= gpu_total_mib,
        fills_card=smi_high > gpu_total_mib,
        on_card=(round(min(smi_low, gpu_total_mib), 1), round(min(smi_high, gpu_total_mib), 1)),
    )
    if fit.fits is False and fit.allocated_fits:
        st.notes.add("est_note_tight", total=round(gpu_total_mib))
    return fit


def _flag(config: ConfigFacts, key: str, default: bool) -> bool:
    from oomdoctor.facts.config import setting

    value = setting(config, key)
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def _save_terms(st: _Setting, trainable_params: int) -> tuple[dict[str, float], dict[str, float]]:
    """What a checkpoint save adds (bytes): on one GPU, beyond what the run holds between steps, and in host
    RAM of the node (the saving ranks). Returns ``(gpu_parts, host_parts)``, the parts named."""
    from oomdoctor.facts.config import setting

    config, s, sk, method, zero = st.config, st.s, st.k["save"], st.method, st.zero
    trainable_bytes = _trainable_bytes(st)
    opt_state_per_param = _optimizer_bytes(st)[0]
    fsdp = bool(setting(config, "fsdp"))
    gathered = float(sk["gathered_weight_bytes"])
    body = s.params - s.embedding_params
    gpu: dict[str, float] = {}
    host: dict[str, float] = {}
    if zero >= 3 and sk["zero3_gathers_16bit_weights"]:
        gpu["zero3_gather"] = s.vocab * s.hidden * gathered
    if fsdp:
        gpu["fsdp_unshard"] = (s.embedding_params + body / max(1, s.layers)) * gathered
    if config.quantization_bit and int(config.quantization_bit) == 8 and method != "full":
        gpu["int8_layout_copy"] = max(0, body - s.layers * s.norms * s.hidden) * float(
            sk["int8_layout_copy_bytes"]
        )
    if method == "lora":
        saved = trainable_params * trainable_bytes  # the adapter only
    elif zero:
        saved = s.params * gathered  # DeepSpeed writes its 16-bit weights
    else:
        saved = s.params * (trainable_bytes if method == "full" else gathered)
    # a gathered state dict (ZeRO-3, FSDP full) is built whole on rank 0's CPU; otherwise safetensors copies
    # one shard at a time
    gathered_to_cpu = (zero >= 3 or fsdp) and method != "lora"
    host["state_dict_copy"] = saved if gathered_to_cpu else min(saved, float(sk["max_shard_mib"]) * MIB)
    if not _flag(config, "save_only_model", bool(sk["save_only_model_default"])):
        largest = s.vocab * s.hidden if method in ("full", "freeze") else trainable_params / max(1, s.layers)
        if zero:
            host["optimizer_copy"] = trainable_params * float(
                sk["flat_partition_bytes"]
            )  # every rank's flat partition
        elif fsdp:
            host["optimizer_copy"] = trainable_params * opt_state_per_param  # gathered on rank 0
            gpu["optimizer_gather"] = largest * opt_state_per_param
        else:
            host["optimizer_copy"] = largest * opt_state_per_param / 2  # one moment at a time, rank 0 only
    return gpu, host


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
    st = _setting(config, model, k)
    lengths = _lengths(st, data, longest_tokens)
    trainable_set, trainable_params = _trainable(st)
    held = _state(st, trainable_params)
    act = _activations(st, lengths, trainable_set)
    peaks = _peaks(st, lengths, held, act)
    reserved_b = _reserved(st, held, act, peaks)
    smi = _nvidia_smi_band(reserved_b, k)
    fit = _fit(st, peaks.peak, smi, gpu_total_mib)
    if st.world > 1:
        st.notes.add("est_note_per_gpu", gpus=st.world)
    rendered = st.notes.rendered()
    # what a checkpoint adds on the GPU and in host RAM (not part of the peak: saves are rare)
    save_gpu, save_host = _save_terms(st, int(trainable_params))
    terms = _terms_mib(held, act, peaks)
    return Estimate(
        peak_allocated_mib=round(peaks.peak / MIB, 1), dominant_term=_dominant_term(terms),
        phases=_rounded({"load": peaks.load / MIB, "train": peaks.train / MIB, "eval": peaks.eval / MIB}),
        terms=_rounded(terms), trainable_params=int(trainable_params), attention=act.attention,
        expected_nvidia_smi_mib=(round(smi[0], 1), round(smi[1], 1)),
        expected_reserved_mib=(round(reserved_b[0] / MIB, 1), round(reserved_b[1] / MIB, 1)),
        # the lengths
        padded_len=lengths.padded_len, padded_len_source=lengths.padded_source,
        micro_batch=lengths.micro_batch, eval_batch=lengths.eval_batch,
        eval_len=lengths.eval_len if config.do_eval else None,
        variable_lengths=not config.packing, tokens_per_micro_batch=int(lengths.tokens),
        # the card
        gpu_total_mib=gpu_total_mib, fits=fit.fits, allocated_fits=fit.allocated_fits,
        headroom_mib=round(fit.headroom, 1) if fit.headroom is not None else None,
        fills_card=fit.fills_card, expected_nvidia_smi_on_card_mib=fit.on_card,
        # what it rests on
        model_source=model.source, assumptions=[note["en"] for note in rendered], notes=rendered,
        calibration=calibration.describe() if calibration is not None else None,
        save_gpu_mib=_rounded({key: value / MIB for key, value in save_gpu.items()}),
        save_host_mib=_rounded({key: value / MIB for key, value in save_host.items()}),
    )  # fmt: skip


def _nvidia_smi_band(reserved_b: tuple[float, float], k: dict[str, Any]) -> tuple[float, float]:
    """What nvidia-smi shows (MiB, low and high): what the allocator reserves, plus the CUDA context."""
    ctx_low, ctx_high = (float(v) for v in k["cuda_context_mib"])
    return reserved_b[0] / MIB + ctx_low, reserved_b[1] / MIB + ctx_high


def _terms_mib(held: _State, act: _Activations, peaks: _Peaks) -> dict[str, float]:
    """The estimate's terms (MiB): what the weights, the trainable state, the activations, the logits and
    loss, the evaluation and the overhead each add."""
    return {
        "weights": held.weights / MIB,
        "trainable_state": held.trainable_state / MIB,
        "activations": act.total / MIB,
        "logits_loss": act.loss / MIB,
        "eval": peaks.eval_extra / MIB,
        "overhead": peaks.misc / MIB,
    }


def _dominant_term(terms: dict[str, float]) -> str:
    """The largest term of the training step's peak (evaluation is not part of it)."""
    train_terms = {
        key: terms[key] for key in ("weights", "trainable_state", "activations", "logits_loss", "overhead")
    }
    return max(train_terms, key=lambda key: train_terms[key])


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {key: round(value, 1) for key, value in values.items()}
