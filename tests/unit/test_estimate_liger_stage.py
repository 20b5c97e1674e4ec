"""Liger's fused loss counts only where LLaMA-Factory lets it fuse: its loader passes require_logits for every
stage but pt and sft (model/loader.py), so a DPO run with enable_liger_kernel still builds the full logits
(LLaMA-Factory#7938's shape: DPO at a 32k cutoff with Liger on)."""

from __future__ import annotations

from oomdoctor.estimate import estimate
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.model import model_from_name

BASE = {
    "model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct",
    "finetuning_type": "lora",
    "cutoff_len": 32768,
    "per_device_train_batch_size": 1,
    "bf16": True,
    "enable_liger_kernel": True,
}


def _loss_mib(**extra: object) -> float:
    config = config_from_mapping({**BASE, **extra})
    return estimate(config, model_from_name(config.model_name_or_path)).terms["logits_loss"]


def test_dpo_keeps_its_full_logits_under_liger() -> None:
    sft, dpo = _loss_mib(stage="sft"), _loss_mib(stage="dpo")
    without = _loss_mib(stage="dpo", enable_liger_kernel=False)
    assert dpo == without  # Liger changes nothing for DPO
    assert sft * 10 < dpo  # for SFT it fuses: no vocabulary-sized tensor
