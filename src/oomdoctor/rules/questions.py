"""The questions the engine itself owns (their texts are code-owned, in ``i18n.MESSAGES``).

A node may ask one of these by key alone (``ask: {key: card_bf16}``); the answers feed the derived facts
(``derived.phase``, ``derived.weights_loaded``, ``derived.memory_kind``, ``derived.card_bf16``). Nodes can
also define questions of their own, with texts in the rule file.
"""

from __future__ import annotations

from collections.abc import Mapping

from oomdoctor.diagnosis import Answer, Question
from oomdoctor.i18n import both

# key -> allowed answer values, in the order they are offered.
BUILTIN_QUESTIONS: dict[str, tuple[str, ...]] = {
    "phase": ("load", "first_batch", "long_sample", "eval", "save", "optimizer_step"),
    "weights_loaded": ("yes", "no"),
    "memory_kind": ("gpu", "host"),
    "card_bf16": ("yes", "no"),
    # The card's memory in GB when no file says it (no --gpu-mib, no total capacity in the log, no NVML): the
    # typical sizes, smallest first (the app's keys 1-9 choose them); settled last in ``assemble``.
    "card_gb": ("8", "12", "16", "24", "32", "40", "48", "80", "141"),
    # The processes of a ZeRO/FSDP run when nothing states them (no launcher line, no "world size:", no
    # WORLD_SIZE; a rank number seen only bounds them): ZeRO shards its state by it. Settled last in ``assemble``.
    "world_size": ("1", "2", "4", "8", "16", "32", "64"),
}
MIB_PER_GB = 1024  # a card sold as "24 GB" holds 24 GiB (nvidia-smi: 24564 MiB on an RTX 4090)


def builtin_question(key: str, asked_by: str) -> Question:
    """The built-in question ``key`` as the Diagnosis carries it."""
    return Question(
        key=key,
        text=both(f"q_{key}"),
        answers=[Answer(value=v, label=both(f"q_{key}_{v}")) for v in BUILTIN_QUESTIONS[key]],
        asked_by=asked_by,
    )


def answered_card_mib(answers: Mapping[str, str]) -> float | None:
    """The card's memory from the ``card_gb`` answer, in MiB (None when not answered)."""
    value = answers.get("card_gb")
    return float(value) * MIB_PER_GB if value else None


def answered_world_size(answers: Mapping[str, str]) -> int | None:
    """The processes from the ``world_size`` answer (None when not answered)."""
    value = answers.get("world_size")
    return int(value) if value else None


def yes_no(value: str | None) -> bool | None:
    """A yes/no answer as a bool (``None`` when not answered)."""
    if value is None:
        return None
    return value == "yes"
