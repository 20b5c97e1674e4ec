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
    image_pixels = _positive(raw.get("image_max_pixels"), defaults["image_max_pixels"])
    token_px = (family["patch_px"] * family["merge"]) ** 2
    video = None
    frames = _positive(raw.get("video_maxlen"), defaults["video_maxlen"])
    if raw.get("video_max_pixels") is not None or raw.get("video_maxlen") is not None:
        per_frame = _positive(raw.get("video_max_pixels"), defaults["video_max_pixels"]) // token_px
        video = math.ceil(frames / family["temporal_patch"]) * per_frame
    return VisionTokens(family["name"], image_pixels // token_px, image_pixels, video, frames)


def _positive(value: object, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return int(default)
    return int(value)
