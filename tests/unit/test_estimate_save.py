"""The estimate's save terms (memory_model.yaml ``save``): what a checkpoint adds on the GPU and in host RAM."""

from __future__ import annotations

from typing import Any

import pytest

from oomdoctor.estimate.memory import MIB, estimate
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.model import model_from_name

BASE = {"model_name_or_path": "Qwen/Qwen3-8B", "stage": "sft", "do_train": True, "dataset": "d", "cutoff_len": 1024,
        "bf16": True, "output_dir": "x"}  # fmt: skip


def _est(world: int | None = None, **extra: Any):  # type: ignore[no-untyped-def]
    config = config_from_mapping({**BASE, **extra}, world_size=world)
    model = model_from_name(config.model_name_or_path)
    assert model is not None
    return estimate(config, model), model


def test_a_lora_save_adds_nothing_on_the_gpu_and_the_adapter_in_host_ram() -> None:
    est, _ = _est()
    assert est.save_gpu_mib == {}
    adapter = est.trainable_params * 4 / MIB  # type: ignore[operator]
    assert est.save_host_mib["state_dict_copy"] == pytest.approx(adapter, rel=0.01)
    assert _est(save_only_model=True)[0].save_host_mib.keys() == {"state_dict_copy"}  # no optimizer written


def test_zero3_gathers_the_embedding_on_the_gpu_and_the_16bit_model_on_rank_0() -> None:
    est, model = _est(8, finetuning_type="full", deepspeed="examples/deepspeed/ds_z3_config.json")
    assert est.save_gpu_mib["zero3_gather"] == pytest.approx(
        model.vocab_size * model.hidden_size * 2 / MIB, rel=0.01
    )  # type: ignore[operator]
    assert est.save_host_mib["state_dict_copy"] == pytest.approx(
        est.terms["weights"] * 8, rel=0.02
    )  # unsharded
    assert est.peak_allocated_mib == _est(8, finetuning_type="full", deepspeed="examples/deepspeed/ds_z3_config.json",
                                          save_steps=10)[0].peak_allocated_mib  # fmt: skip


def test_an_int8_base_is_copied_on_the_gpu_to_be_saved() -> None:
    est, model = _est(quantization_bit=8)
    sixteen_bit = model.embedding_params * 2 / MIB  # type: ignore[operator]  # embeddings stay 16-bit, not copied
    assert est.save_gpu_mib["int8_layout_copy"] == pytest.approx(est.terms["weights"] - sixteen_bit, rel=0.05)
