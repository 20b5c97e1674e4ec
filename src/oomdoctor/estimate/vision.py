"""Language-model tokens an image or a video becomes in a multimodal run, from the config's pixel limits and the
model family's patching (``vision`` in memory_model.yaml). Pure; no I/O beyond that table.

They are part of the sequence ``cutoff_len`` bounds, so the estimate's length (the cutoff, or the measured
longest sample, which LLaMA-Factory's processor already counts with its image tokens) holds them; what this adds
is the size of one image or video in tokens, to set against the cutoff: a limit of pixels that alone makes a
sequence longer than the cutoff leaves every such sample at the cutoff.
"""

from __future__ import annotations

import math
from typing import Any

from oomdoctor.facts.types import ConfigFacts, ModelFacts
from oomdoctor.records import record


@record(frozen=True)
class VisionTokens:
    """The tokens one image (and one video) of a multimodal family becomes, at the config's pixel limits."""

    family: str
    image_tokens: int  # one image at image_max_pixels
    image_pixels: int
    pixels_key: (
        str  # the config key the pixel limit comes from (image_max_pixels, or the older image_resolution)
    )
    video_tokens: (
        int | None
    )  # one video at video_max_pixels per frame and video_maxlen frames (None: no video)
    video_frames: int


def _family(config: ConfigFacts, model: ModelFacts | None, table: dict[str, Any]) -> dict[str, Any] | None:
    template = str(config.raw.get("template") or "").lower()
    name = str(config.model_name_or_path or "").lower()
    model_type = (model.model_type or "").lower() if model is not None else ""
    families: list[dict[str, Any]] = table["families"]
    for family in families:
        if template in family["templates"] or model_type in family["model_types"]:
            return family
        if any(part in name for part in family["name_contains"]):
            return family
    return None


def vision_tokens(config: ConfigFacts | None, model: ModelFacts | None = None) -> VisionTokens | None:
    """The tokens of one image (and one video) for a multimodal family the table knows; None otherwise."""
    from oomdoctor.estimate.memory import constants

    if config is None:
        return None
    table = constants()["vision"]
    family = _family(config, model, table)
    if family is None:
        return None
    raw, defaults = config.raw, table["defaults"]
    image_pixels, pixels_key = _image_pixels(raw, table)
    token_px = (family["patch_px"] * family["merge"]) ** 2
    video = None
    frames = _positive(raw.get("video_maxlen"), defaults["video_maxlen"])
    if raw.get("video_max_pixels") is not None or raw.get("video_maxlen") is not None:
        per_frame = _positive(raw.get("video_max_pixels"), defaults["video_max_pixels"]) // token_px
        video = math.ceil(frames / family["temporal_patch"]) * per_frame
    return VisionTokens(family["name"], image_pixels // token_px, image_pixels, pixels_key, video, frames)


def _image_pixels(raw: dict[str, Any], table: dict[str, Any]) -> tuple[int, str]:
    """(the pixels one image is resized to at most, the key that says it): image_max_pixels, else the older
    image_resolution (a side up to ``side_max``, else a number of pixels), else LLaMA-Factory's default."""
    if raw.get("image_max_pixels") is not None or raw.get("image_resolution") is None:
        return _positive(
            raw.get("image_max_pixels"), table["defaults"]["image_max_pixels"]
        ), "image_max_pixels"
    value = _positive(raw.get("image_resolution"), table["defaults"]["image_max_pixels"])
    side = value <= int(table["image_resolution"]["side_max"])
    return (value * value if side else value), "image_resolution"


def tower_eval_bytes(vt: VisionTokens, attention: str, images: int) -> float:
    """Transient bytes of one vision-tower layer run without grad over ``images`` images at the pixel limit:
    its hidden states, q/k/v and MLP intermediates per patch, and, under eager attention, the attention
    weights over each image's patches (heads x patches^2; SDPA and flash attention never hold them)."""
    from oomdoctor.estimate.memory import constants

    table = constants()["vision"]
    family = next(f for f in table["families"] if f["name"] == vt.family)
    patches = vt.image_tokens * int(family["merge"]) ** 2
    per_patch = 2.0 * (4 * int(family["tower_embed_dim"]) + int(family["tower_mlp_dim"]))  # 16-bit states
    weights = 0.0
    if attention == "eager":
        weights = float(table["tower_attention_bytes"]) * int(family["tower_heads"]) * patches * patches
    return float(images * (patches * per_patch + weights))


def _positive(value: object, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return int(default)
    return int(value)
