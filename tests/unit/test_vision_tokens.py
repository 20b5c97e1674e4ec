"""A Qwen2-VL / Qwen2.5-VL config's pixel limits in tokens (estimate/vision.py, ``vision`` in memory_model.yaml),
set against the cutoff in a finding (rules/findings._vision_tokens)."""

from __future__ import annotations

from oomdoctor.estimate.vision import vision_tokens
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose


def _config(**fields: object):
    return config_from_mapping({"stage": "sft", "finetuning_type": "lora", "do_train": True, **fields})


def test_the_default_pixel_limit_is_about_750_tokens_an_image() -> None:
    vt = vision_tokens(_config(model_name_or_path="Qwen/Qwen2-VL-7B-Instruct", template="qwen2_vl"))
    assert vt is not None and vt.image_tokens == 768 * 768 // (28 * 28) and vt.video_tokens is None


def test_a_video_limit_counts_its_frames_in_pairs() -> None:
    vt = vision_tokens(_config(template="qwen2_vl", video_max_pixels=128 * 128, video_maxlen=16))
    assert vt is not None and vt.video_tokens == 8 * (128 * 128 // 784) and vt.video_frames == 16


def test_a_text_model_has_no_vision_tokens() -> None:
    assert vision_tokens(_config(model_name_or_path="Qwen/Qwen2.5-7B-Instruct", template="qwen")) is None


def test_a_huge_image_limit_with_a_trained_tower_is_said_against_the_cutoff() -> None:
    config = _config(
        model_name_or_path="Qwen/Qwen2.5-VL-7B-Instruct",
        template="qwen2_vl",
        image_max_pixels=4096 * 4096,
        cutoff_len=8192,
        freeze_vision_tower=False,
    )
    finding = next(f for f in diagnose(facts_of(config=config)).findings if f.id == "vision_tokens")
    assert "21,399" in finding.text["en"] and "cutoff_len 8192" in finding.text["en"]
    assert "freeze_vision_tower" in finding.text["en"] and "8192" in finding.text["zh"]
    small = _config(template="qwen2_vl", image_max_pixels=512 * 512, cutoff_len=4096)
    text = next(f for f in diagnose(facts_of(config=small)).findings if f.id == "vision_tokens").text["en"]
    assert "longer than cutoff_len" not in text and "freeze_vision_tower" not in text
