"""Is the failing request the logits? Evidence the tool already has, before any estimate.

Two signs, either is enough:
- a frame that computes over the full-vocabulary logits (the loss, log-probabilities: ``logits_frames`` in
  log_markers.yaml) among the innermost frames of the failure;
- a request the size of this batch's logits: micro-batch x padded length x vocabulary x 4 bytes (fp32, the
  upcast for the loss) or 2 (bf16/fp16), doubled for a stage that holds chosen and rejected together
  (DPO, KTO, ORPO, SimPO).

Pure: facts in, a word out. No I/O beyond the bundled table (read once).
"""

from __future__ import annotations

from functools import lru_cache

from oomdoctor.facts.log_tables import markers_raw

INNERMOST_FRAMES = 5  # the allocation is in the last few frames; a loss call further out wraps a forward
SIZE_TOLERANCE = 0.06  # the message rounds to two decimals; a shifted (length - 1) logits tensor is close too
PAIRED_STAGES = frozenset({"dpo", "kto"})  # LLaMA-Factory runs ORPO and SimPO as stage dpo (pref_loss)


@lru_cache(maxsize=1)
def logits_frames() -> frozenset[str]:
    raw = markers_raw()
    return frozenset(raw.get("logits_frames") or ())


def logits_frame(frames: list[str]) -> str | None:
    """The logits function among the innermost frames (outermost first, as LogFacts holds them)."""
    known = logits_frames()
    return next((f for f in reversed(frames[-INNERMOST_FRAMES:]) if f in known), None)


def logits_mib(batch: int, length: int, vocab: int, bytes_per: int) -> float:
    return batch * length * vocab * bytes_per / 1024**2


# Trainers that score every sampled or paired token by its log-probability over the whole vocabulary (the policy's
# and the reference's: PPO/GRPO, DPO/KTO): in their step a single request this share of the card is those logits.
LOGPROB_STAGES = frozenset({"ppo", "dpo", "kto"})
LOGPROB_REQUEST_SHARE = 1 / 3


def request_is_logprob_logits(
    requested_mib: float | None, capacity_mib: float | None, vocab: int | None, stage: str | None
) -> bool:
    """With no vocabulary to size the logits by (no model shape), a log-prob trainer's single request of at
    least ``LOGPROB_REQUEST_SHARE`` of the card: one tensor that large in such a step is most likely the logits
    (activations are many per-layer tensors; only eager attention's scores, batch x heads x length squared, come
    near, and trainers run SDPA / flash attention by default)."""
    if vocab or not requested_mib or not capacity_mib or (stage or "") not in LOGPROB_STAGES:
        return False
    return requested_mib >= LOGPROB_REQUEST_SHARE * capacity_mib


def request_is_logits(
    requested_mib: float | None, batch: int | None, lengths: list[int], vocab: int | None, stage: str | None
) -> bool:
    """The request matches batch x length x vocabulary at 4 or 2 bytes, for one of the candidate lengths."""
    if not requested_mib or not batch or not vocab:
        return False
    rows = [batch, 2 * batch] if (stage or "") in PAIRED_STAGES else [batch]
    for length in lengths:
        for n in rows:
            for bytes_per in (4, 2):
                size = logits_mib(n, length, vocab, bytes_per)
                if abs(requested_mib - size) <= SIZE_TOLERANCE * size:
                    return True
    return False
