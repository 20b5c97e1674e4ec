"""The memory estimate on the course's measured pair, and how each setting moves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oomdoctor.errors import BadInput
from oomdoctor.estimate import (
    accumulation_for,
    estimate,
    largest_fitting_micro_batch,
    micro_batch_candidates,
    with_changes,
)
from oomdoctor.facts.config import config_from_mapping, read_config
from oomdoctor.facts.model import model_from_name
from oomdoctor.facts.types import ConfigFacts, DataFacts, ModelFacts

REPO = Path(__file__).resolve().parents[2]
COURSE_CONFIG = REPO / "configs" / "keywords_clean_train.yaml"
V100_32GB_MIB = 32510.0
# The course's preprocessing check: longest training sample 957 tokens, longest validation sample 604.
COURSE_DATA = DataFacts(source="given", max_tokens=957, eval_max_tokens=604)


@pytest.fixture(scope="module")
def course() -> ConfigFacts:
    return read_config(COURSE_CONFIG)


@pytest.fixture(scope="module")
def qwen3() -> ModelFacts:
    model = model_from_name("Qwen/Qwen3-0.6B")
    assert model is not None
    return model


def _cfg(**raw: Any) -> ConfigFacts:
    base = {"model_name_or_path": "Qwen/Qwen3-0.6B", "stage": "sft", "finetuning_type": "lora", "fp16": True}
    return config_from_mapping({**base, **raw})


# ------------------------------------------------------------------------------ the course's pair


def test_course_batch_4_logits_dominate_and_allocated_matches_the_tensor_accounting(course, qwen3) -> None:
    result = estimate(course, qwen3, data=COURSE_DATA, gpu_total_mib=V100_32GB_MIB)
    assert result.padded_len == 960 and result.padded_len_source == "longest_sample"
    assert result.dominant_term == "logits_loss"
    assert result.phases["train"] == pytest.approx(8100, rel=0.15)
    assert result.peak_allocated_mib == pytest.approx(8100, rel=0.15)
    # logits/loss: 12 bytes x 4 x 960 x 151,936
    assert result.terms["logits_loss"] == pytest.approx(12 * 4 * 960 * 151936 / 2**20, rel=1e-3)
    # 30x more than all 28 checkpointed layers together (memory-model.md)
    assert result.terms["logits_loss"] > 25 * result.terms["activations"]


def test_course_batch_2_train_step_matches_the_tensor_accounting(course, qwen3) -> None:
    batch_2 = with_changes(course, {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 16})
    result = estimate(batch_2, qwen3, data=COURSE_DATA, gpu_total_mib=V100_32GB_MIB)
    assert result.phases["train"] == pytest.approx(4650, rel=0.15)
    assert result.dominant_term == "logits_loss"


def test_course_band_explains_what_nvidia_smi_showed(course, qwen3) -> None:
    """nvidia-smi showed 28,588 (batch 4) and 22,230 MiB (batch 2): far above the allocated peaks. The
    band's high end (allocator creep with variable lengths + eval batch 8 by default) covers both."""
    for batch, accumulation, measured in ((4, 8, 28588), (2, 16, 22230)):
        config = with_changes(
            course, {"per_device_train_batch_size": batch, "gradient_accumulation_steps": accumulation}
        )
        result = estimate(config, qwen3, data=COURSE_DATA, gpu_total_mib=V100_32GB_MIB)
        low, high = result.expected_nvidia_smi_mib
        assert low < measured <= high, (batch, result.expected_nvidia_smi_mib)
        assert high == pytest.approx(measured, rel=0.15)
        assert measured > 2.5 * result.phases["train"]  # why the allocated figure alone misleads
        assert result.variable_lengths


def test_eval_with_the_default_batch_of_8_outweighs_a_training_batch_of_2(course, qwen3) -> None:
    assert not course.per_device_eval_batch_size_set and course.per_device_eval_batch_size == 8
    batch_2 = with_changes(course, {"per_device_train_batch_size": 2})
    result = estimate(batch_2, qwen3, data=COURSE_DATA)
    assert result.eval_batch == 8 and result.eval_len == 608
    assert result.phases["eval"] > result.phases["train"]
    smaller_eval = estimate(with_changes(batch_2, {"per_device_eval_batch_size": 2}), qwen3, data=COURSE_DATA)
    assert smaller_eval.phases["eval"] < result.phases["eval"] / 2


def test_the_calculator_without_a_logits_term_would_miss_most_of_it(course, qwen3) -> None:
    """ApX's 9.8 GB had no logits term; here logits are most of the training peak."""
    result = estimate(course, qwen3, data=COURSE_DATA)
    assert result.terms["logits_loss"] / result.phases["train"] > 0.75


# ------------------------------------------------------------------------------ lengths


def test_lowering_cutoff_above_the_longest_sample_saves_nothing(course, qwen3) -> None:
    at_2048 = estimate(course, qwen3, data=COURSE_DATA)
    at_1024 = estimate(with_changes(course, {"cutoff_len": 1024}), qwen3, data=COURSE_DATA)
    assert at_1024.peak_allocated_mib == at_2048.peak_allocated_mib
    at_512 = estimate(with_changes(course, {"cutoff_len": 512}), qwen3, data=COURSE_DATA)
    assert at_512.padded_len == 512 and at_512.phases["train"] < at_2048.phases["train"]


def test_unknown_longest_sample_falls_back_to_cutoff_len_and_says_so(course, qwen3) -> None:
    result = estimate(course, qwen3)
    assert result.padded_len == 2048 and result.padded_len_source == "cutoff_len"
    assert any("cutoff_len" in note["en"] and "lengths" in note["en"] for note in result.notes)
    assert all(note["zh"] for note in result.notes)
    given = estimate(course, qwen3, longest_tokens=957)
    assert given.padded_len == 960 and given.padded_len_source == "longest_sample"


def test_padded_length_rounds_up_to_a_multiple_of_8(qwen3) -> None:
    assert estimate(_cfg(), qwen3, longest_tokens=1).padded_len == 8
    assert estimate(_cfg(), qwen3, longest_tokens=1000).padded_len == 1000
    assert estimate(_cfg(), qwen3, longest_tokens=1001).padded_len == 1008
    assert estimate(_cfg(cutoff_len=300), qwen3, longest_tokens=5000).padded_len == 304


def test_packing_fills_every_sequence_and_gives_fixed_shapes(qwen3) -> None:
    packed = estimate(_cfg(packing=True, cutoff_len=1024), qwen3, longest_tokens=100)
    assert packed.padded_len == 1024 and not packed.variable_lengths
    unpacked = estimate(_cfg(cutoff_len=1024), qwen3, longest_tokens=1024)
    low, high = packed.expected_nvidia_smi_mib
    assert high < unpacked.expected_nvidia_smi_mib[1]  # no creep with fixed shapes
    # Only what comes and goes every step is inflated by the fixed-shape factor; the persistent state is cached tight.
    static = packed.terms["weights"] + packed.terms["trainable_state"] + packed.terms["overhead"]
    assert high == pytest.approx(static + (packed.peak_allocated_mib - static) * 1.3 + 1300, rel=1e-3)
    assert packed.expected_reserved_mib == pytest.approx((low - 300, high - 1300), abs=0.2)


def test_persistent_state_is_not_inflated_by_the_allocator(qwen3) -> None:
    """A full fine-tune's weights, gradients and Adam state are allocated once: the reserved high end grows
    with the per-step memory, not with the whole peak (PEFT's Llama-3.2-3B full fine-tune reserved 1.02 x)."""
    full = estimate(
        _cfg(finetuning_type="full", packing=True, cutoff_len=512, per_device_train_batch_size=1), qwen3
    )
    reserved_low, reserved_high = full.expected_reserved_mib
    assert reserved_high < full.peak_allocated_mib * 1.3
    assert reserved_low == pytest.approx(full.peak_allocated_mib * 1.03, rel=1e-3)


# ------------------------------------------------------------------------------ settings


def test_liger_kernel_removes_the_training_logits_but_not_eval(qwen3) -> None:
    plain = estimate(_cfg(eval_dataset="v", eval_strategy="steps"), qwen3, longest_tokens=960)
    liger = estimate(
        _cfg(eval_dataset="v", eval_strategy="steps", enable_liger_kernel=True), qwen3, longest_tokens=960
    )
    assert liger.terms["logits_loss"] < plain.terms["logits_loss"] / 50
    assert liger.terms["eval"] == plain.terms["eval"]
    assert liger.dominant_term != "logits_loss"


def test_checkpointing_off_stores_every_layer(qwen3) -> None:
    on = estimate(_cfg(), qwen3, longest_tokens=1024)
    off = estimate(_cfg(disable_gradient_checkpointing=True), qwen3, longest_tokens=1024)
    assert off.terms["activations"] > 10 * on.terms["activations"]
    # with checkpointing: one 16-bit hidden state per layer and token
    tokens = on.tokens_per_micro_batch
    assert on.terms["activations"] == pytest.approx(2 * 28 * 1024 * tokens / 2**20, rel=1e-6)


def test_eager_attention_adds_the_score_matrices(qwen3) -> None:
    sdpa = estimate(_cfg(disable_gradient_checkpointing=True), qwen3, longest_tokens=2048)
    eager = estimate(
        _cfg(disable_gradient_checkpointing=True, flash_attn="disabled"), qwen3, longest_tokens=2048
    )
    assert eager.attention == "eager" and sdpa.attention == "sdpa"
    extra_mib = eager.terms["activations"] - sdpa.terms["activations"]
    # 6 bytes per score x 16 heads x 2048^2 x 8 sequences x 28 layers
    assert extra_mib == pytest.approx(6 * 16 * 2048 * 2048 * 8 * 28 / 2**20, rel=0.01)


def test_gemma2_falls_back_to_eager_under_auto() -> None:
    gemma = model_from_name("google/gemma-2-2b-it")
    assert gemma is not None
    result = estimate(_cfg(model_name_or_path="google/gemma-2-2b-it"), gemma, longest_tokens=512)
    assert result.attention == "eager"


def test_qlora_shrinks_the_weights_to_about_a_quarter() -> None:
    llama = model_from_name("meta-llama/Llama-2-7b-hf")
    assert llama is not None
    lora = estimate(_cfg(model_name_or_path="llama-2-7b"), llama, longest_tokens=512)
    qlora = estimate(_cfg(model_name_or_path="llama-2-7b", quantization_bit=4), llama, longest_tokens=512)
    assert lora.terms["weights"] == pytest.approx(6.74e9 * 2 / 2**20, rel=0.01)
    assert 0.25 < qlora.terms["weights"] / lora.terms["weights"] < 0.33
    eight_bit = estimate(_cfg(model_name_or_path="llama-2-7b", quantization_bit=8), llama, longest_tokens=512)
    assert qlora.terms["weights"] < eight_bit.terms["weights"] < lora.terms["weights"]


def test_lora_state_is_16_bytes_per_adapter_parameter(qwen3) -> None:
    result = estimate(_cfg(), qwen3, longest_tokens=512)
    per_layer = 8 * ((1024 + 2048) + 2 * (1024 + 1024) + (2048 + 1024) + 2 * (1024 + 3072) + (3072 + 1024))
    assert result.trainable_params == per_layer * 28
    fp32_weights_mib = result.trainable_params * 4 / 2**20
    assert result.terms["trainable_state"] + fp32_weights_mib == pytest.approx(
        result.trainable_params * 16 / 2**20, rel=1e-3
    )
    rank_16 = estimate(_cfg(lora_rank=16), qwen3, longest_tokens=512)
    assert rank_16.trainable_params == 2 * result.trainable_params
    q_v_only = estimate(_cfg(lora_target="q_proj,v_proj"), qwen3, longest_tokens=512)
    assert q_v_only.trainable_params == 8 * ((1024 + 2048) + (1024 + 1024)) * 28


def test_full_finetuning_amp_is_16_to_18_bytes_per_parameter_and_pure_bf16_about_8(qwen3) -> None:
    amp = estimate(_cfg(finetuning_type="full"), qwen3, longest_tokens=8)
    per_param_amp = (amp.terms["weights"] + amp.terms["trainable_state"]) * 2**20 / qwen3.params
    assert 16 <= per_param_amp <= 18.01  # terms are rounded to 0.1 MiB
    pure = estimate(_cfg(finetuning_type="full", fp16=False, pure_bf16=True), qwen3, longest_tokens=8)
    per_param_pure = (pure.terms["weights"] + pure.terms["trainable_state"]) * 2**20 / qwen3.params
    assert per_param_pure == pytest.approx(8, rel=0.01)
    eight_bit_adam = estimate(_cfg(finetuning_type="full", optim="adamw_8bit"), qwen3, longest_tokens=8)
    # grads 4 + Adam 8 + autocast copy 2 = 14 bytes -> grads 4 + 8-bit Adam 2 + copy 2 = 8 bytes
    assert eight_bit_adam.terms["trainable_state"] / amp.terms["trainable_state"] == pytest.approx(
        8 / 14, rel=0.01
    )


def _deepspeed(tmp_path: Path, stage: int, offload: bool) -> str:
    import json

    zero: dict[str, Any] = {"stage": stage}
    if offload:
        zero["offload_optimizer"] = {"device": "cpu"}
        if stage == 3:
            zero["offload_param"] = {"device": "cpu"}
    path = tmp_path / f"ds_z{stage}{'_offload' if offload else ''}.json"
    path.write_text(json.dumps({"zero_optimization": zero}), encoding="utf-8")
    return str(path)


def test_zero_shards_state_and_offload_moves_it_to_the_host(tmp_path: Path) -> None:
    llama = model_from_name("llama-3-8b")
    assert llama is not None
    base = {"model_name_or_path": "llama-3-8b", "finetuning_type": "full", "bf16": True}

    def run(stage: int | None, offload: bool = False, gpus: int = 4):
        raw = dict(base)
        if stage is not None:
            raw["deepspeed"] = _deepspeed(tmp_path, stage, offload)
        return estimate(config_from_mapping(raw, world_size=gpus), llama, longest_tokens=512)

    z2, z3 = run(2), run(3)
    assert z3.terms["weights"] == pytest.approx(z2.terms["weights"] / 4, abs=0.1)
    assert z2.terms["trainable_state"] < run(None).terms["trainable_state"] / 3
    z3_offload = run(3, offload=True)
    assert (
        z3_offload.terms["weights"] == 0 and z3_offload.terms["trainable_state"] < z3.terms["trainable_state"]
    )
    assert any("per GPU" in note["en"] for note in z2.notes)


def test_pairwise_stages_feed_two_sequences(qwen3) -> None:
    sft = estimate(_cfg(), qwen3, longest_tokens=512)
    dpo = estimate(_cfg(stage="dpo"), qwen3, longest_tokens=512)
    assert dpo.tokens_per_micro_batch == 2 * sft.tokens_per_micro_batch


def test_no_eval_configured_means_no_eval_phase(qwen3) -> None:
    result = estimate(_cfg(), qwen3, longest_tokens=512)
    assert result.phases["eval"] == 0 and result.terms["eval"] == 0 and result.eval_len is None


def test_phases_and_terms_add_up(course, qwen3) -> None:
    result = estimate(course, qwen3, data=COURSE_DATA)
    train_terms = sum(
        result.terms[k] for k in ("weights", "trainable_state", "activations", "logits_loss", "overhead")
    )
    assert train_terms == pytest.approx(result.phases["train"], abs=0.5)
    assert result.peak_allocated_mib == max(result.phases.values())
    assert result.phases["load"] < result.phases["train"]


def test_fits_against_the_card(course, qwen3) -> None:
    big = estimate(course, qwen3, data=COURSE_DATA, gpu_total_mib=81920)
    assert big.fits is True and big.headroom_mib is not None and big.headroom_mib > 0
    small = estimate(course, qwen3, data=COURSE_DATA, gpu_total_mib=8192)
    assert small.fits is False and small.allocated_fits is False
    unknown = estimate(course, qwen3, data=COURSE_DATA)
    assert unknown.fits is None and unknown.headroom_mib is None


def test_a_model_without_shape_is_bad_input(course) -> None:
    with pytest.raises(BadInput, match="config.json"):
        estimate(course, ModelFacts(name="acme/Mystery", source="unknown"))


# ------------------------------------------------------------------------------ what-if


def test_with_changes_rederives_and_leaves_the_original_alone(course) -> None:
    changed = with_changes(course, {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 16})
    assert changed.effective_batch == course.effective_batch == 32
    assert course.per_device_train_batch_size == 4
    bf16 = with_changes(course, {"fp16": False, "bf16": True})
    assert bf16.precision == "bf16"
    no_gc = with_changes(course, {"disable_gradient_checkpointing": True})
    assert no_gc.gradient_checkpointing is False
    q = with_changes(course, {"quantization_bit": 4})
    assert q.quantization_bit == 4 and with_changes(q, {"quantization_bit": None}).quantization_bit is None


def test_largest_fitting_micro_batch_keeps_the_effective_batch(course, qwen3) -> None:
    assert micro_batch_candidates(course) == [32, 16, 8, 4, 2, 1]
    batch = largest_fitting_micro_batch(course, qwen3, data=COURSE_DATA, gpu_total_mib=V100_32GB_MIB)
    assert batch == 2  # the course's own answer: batch 2 x 16
    assert accumulation_for(course, batch) == 16
    roomy = largest_fitting_micro_batch(course, qwen3, data=COURSE_DATA, gpu_total_mib=143771)
    assert roomy is not None and roomy > 4
    # A 16 GB card cannot even hold the default eval batch of 8 at 608 tokens.
    assert largest_fitting_micro_batch(course, qwen3, data=COURSE_DATA, gpu_total_mib=16160) is None


def test_accumulation_rounds_up_when_the_batch_does_not_divide() -> None:
    config = _cfg(per_device_train_batch_size=3, gradient_accumulation_steps=5)
    assert accumulation_for(config, 2) == 8
    assert accumulation_for(config, 15) == 1


# ------------------------------------------------------------------------------ kinds found on measured peaks


def test_lora_dropout_keeps_a_dropped_out_input_per_adapted_linear(qwen3) -> None:
    """PEFT's dropout(x) is a new tensor for every adapted linear, kept for lora_A's gradient, plus a 1-byte
    mask; at 0 (LLaMA-Factory's default) PEFT uses nn.Identity and nothing more is kept."""
    base = {
        "disable_gradient_checkpointing": True,
        "pure_bf16": True,
        "fp16": False,
        "lora_target": "q_proj,v_proj",
    }
    off = estimate(_cfg(**base), qwen3, longest_tokens=512)
    zero = estimate(_cfg(**base, lora_dropout=0.0), qwen3, longest_tokens=512)
    on = estimate(_cfg(**base, lora_dropout=0.05), qwen3, longest_tokens=512)
    assert zero.terms["activations"] == off.terms["activations"]
    # q and v each keep a 2-byte dropped-out copy and a 1-byte mask of the 1024-wide input, instead of the
    # shared 2-byte input: (2 x 3 - 2) bytes x 1024 per token and layer.
    tokens, layers, hidden = 8 * 512, 28, 1024
    extra_mib = (2 * 3 - 2) * hidden * tokens * layers / 2**20
    assert on.terms["activations"] - off.terms["activations"] == pytest.approx(extra_mib, rel=1e-6)
    assert any("lora_dropout" in note for note in on.assumptions)


def test_gradients_are_not_held_in_the_forward_pass_without_accumulation(qwen3) -> None:
    """The Trainer frees gradients after every step: with gradient_accumulation_steps 1 a full fine-tune's
    forward pass runs without them, with accumulation they stay from the previous micro-batch."""
    common = {"finetuning_type": "full", "pure_bf16": True, "fp16": False, "per_device_train_batch_size": 4}
    one = estimate(_cfg(**common, gradient_accumulation_steps=1), qwen3, longest_tokens=1024)
    four = estimate(_cfg(**common, gradient_accumulation_steps=4), qwen3, longest_tokens=1024)
    grads_mib = qwen3.params * 2 / 2**20
    assert four.phases["train"] - one.phases["train"] == pytest.approx(grads_mib, rel=1e-3)
    assert one.terms["trainable_state"] == four.terms["trainable_state"]
    # The optimizer step still holds them: the step cannot be below weights + gradients + Adam state.
    assert one.phases["train"] >= one.terms["weights"] + one.terms["trainable_state"]
