"""The image resolution of a multimodal run in the estimate (estimate/vision.py, ``vision`` in memory_model.yaml):
tokens per image from the pixel limit, whichever LLaMA-Factory key says it (``image_max_pixels``, or the older
``image_resolution``), and the vision tower's share of the eval phase.

Real numbers: the Qwen2-VL model card's processor bounds (``min_pixels = 256*28*28``, ``max_pixels =
1280*28*28``: "each 28x28 pixel corresponds to a token", "the default range for the number of visual tokens per
image in the model is 4-16384"), and LLaMA-Factory#6712's predict config (``image_resolution: 262144`` runs out,
150000 predicts), whose reporter counts "图片的token = image_resolution/4/14/14"."""

from __future__ import annotations

from oomdoctor.estimate import estimate
from oomdoctor.estimate.vision import tower_eval_bytes, vision_tokens
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.model import model_from_name

QWEN2_VL = "Qwen/Qwen2-VL-7B-Instruct"
EVALUATED = {
    "model_name_or_path": QWEN2_VL,
    "stage": "sft",
    "finetuning_type": "lora",
    "template": "qwen2_vl",
    "do_train": True,
    "dataset": "mllm_demo",
    "eval_dataset": "mllm_demo",
    "eval_strategy": "steps",
    "eval_steps": 100,
    "cutoff_len": 6144,
    "per_device_eval_batch_size": 1,
    "bf16": True,
}


def _config(**fields: object):
    return config_from_mapping({**EVALUATED, **fields})


def test_the_model_cards_pixel_bounds_are_its_token_bounds() -> None:
    for tokens in (4, 256, 1280, 16384):
        vt = vision_tokens(_config(image_max_pixels=tokens * 28 * 28))
        assert vt is not None and vt.image_tokens == tokens and vt.pixels_key == "image_max_pixels"


def test_the_older_image_resolution_key_is_the_same_limit() -> None:
    pixels = vision_tokens(_config(image_resolution=262144))
    assert pixels is not None and pixels.image_pixels == 262144 and pixels.pixels_key == "image_resolution"
    assert pixels.image_tokens == 262144 // 4 // 14 // 14 == 334  # the reporter's own count
    side = vision_tokens(_config(image_resolution=512))  # the first form: the longest side, 512 by default
    assert side is not None and side.image_pixels == 512 * 512 and side.image_tokens == 334
    both_written = vision_tokens(_config(image_resolution=262144, image_max_pixels=1280 * 28 * 28))
    assert both_written is not None and both_written.image_tokens == 1280  # the newer key wins


def test_the_eval_phase_grows_with_the_image_resolution() -> None:
    model = model_from_name(QWEN2_VL)
    assert model is not None
    small, large = (estimate(_config(image_resolution=px), model) for px in (150000, 262144))
    grown = large.terms["eval"] - small.terms["eval"]
    vt_small, vt_large = (
        vision_tokens(_config(image_resolution=150000)),
        vision_tokens(_config(image_resolution=262144)),
    )
    assert vt_small is not None and vt_large is not None
    expected = (tower_eval_bytes(vt_large, "sdpa", 1) - tower_eval_bytes(vt_small, "sdpa", 1)) / 1024**2
    assert grown > 0 and abs(grown - expected) < 0.2  # only the vision tower's part changed
    assert any("image_resolution 262144" in note.en for note in large.notes)
    text_only = estimate(_config(model_name_or_path="Qwen/Qwen2.5-7B-Instruct", template="qwen"), model_from_name("Qwen/Qwen2.5-7B-Instruct"))  # fmt: skip
    assert not any("vision tower" in note.en for note in text_only.notes)


def test_eager_attention_holds_each_images_attention_weights() -> None:
    vt = vision_tokens(_config(image_max_pixels=1280 * 28 * 28))
    assert vt is not None
    patches = 1280 * 4  # 14 x 14 px a patch, 2 x 2 patches a token
    weights = 6 * 16 * patches * patches  # fp32 softmax + 16-bit copy, 16 heads
    assert tower_eval_bytes(vt, "eager", 2) - tower_eval_bytes(vt, "sdpa", 2) == 2 * weights
    assert tower_eval_bytes(vt, "fa2", 1) == tower_eval_bytes(vt, "sdpa", 1)


def test_the_finding_names_the_key_the_config_wrote() -> None:
    from oomdoctor.rules.assemble import facts_of
    from oomdoctor.rules.engine import diagnose

    older = _config(image_resolution=262144)
    found = next(f for f in diagnose(facts_of(config=older)).findings if f.id == "vision_tokens")
    assert "image_resolution 262,144" in found.text.en and "334" in found.text.en and "334" in found.text.zh
    newer = _config(image_max_pixels=262144)
    found = next(f for f in diagnose(facts_of(config=newer)).findings if f.id == "vision_tokens")
    assert "image_max_pixels" in found.text.en and "image_resolution" not in found.text.en
