"""The questions the engine itself owns (their texts are code-owned, in ``i18n.MESSAGES``).

A node may ask one of these by key alone (``ask: {key: card_bf16}``); the answers feed the derived facts
(``derived.phase``, ``derived.weights_loaded``, ``derived.memory_kind``, ``derived.card_bf16``). Nodes can
also define questions of their own, with texts in the rule file.
"""

from __future__ import annotations

from collections.abc import Mapping

from oomdoctor.diagnosis import Answer, Question
from oomdoctor.errors import BadInput
from oomdoctor.i18n import both, msg

# key -> allowed answer values, in the order they are offered.
BUILTIN_QUESTIONS: dict[str, tuple[str, ...]] = {
    "phase": ("load", "first_batch", "long_sample", "eval", "save", "optimizer_step"),
    "weights_loaded": ("yes", "no"),
    # none: the run did not run out of memory at all (a NaN, a hang, another error brought with no log):
    # offered only where no log line shows an OOM; then no OOM is said
    "memory_kind": ("gpu", "host", "none"),
    "card_bf16": ("yes", "no"),
    # The card's memory in GB when no file says it (no --gpu-mib, no total capacity in the log, no NVML): the
    # typical sizes, smallest first (the app's keys 1-9 choose them); settled last in ``assemble``.
    "card_gb": ("8", "12", "16", "24", "32", "40", "48", "80", "141"),
    # The processes of a ZeRO/FSDP run when nothing states them (no launcher line, no "world size:", no
    # WORLD_SIZE; a rank number seen only bounds them): ZeRO shards its state by it. Settled last in ``assemble``.
    "world_size": ("1", "2", "4", "8", "16", "32", "64"),
}
MIB_PER_GB = 1024  # a card sold as "24 GB" holds 24 GiB (nvidia-smi: 24564 MiB on an RTX 4090)
# A card_gb answer names a class of cards (its label lists them): the estimate takes the smallest card of the
# class, as nvidia-smi totals it in the card table (estimate/gpu_cards.yaml), so that a change is never said to
# fit on a card of the class it may not fit on ("24 GB" as an A10's 23,028 MiB, "11-12 GB" as a 2080 Ti's 11 GiB,
# "141 GB or more" as an H200's 143,771 MiB); "8 GB or less" as a 6 GB laptop card, which the table lacks.
CARD_CLASS_SMALLEST: dict[str, str] = {
    "12": "RTX 2080 Ti", "16": "T4", "24": "A10", "32": "V100-32GB", "40": "A100-40GB", "48": "L40S",
    "80": "H100-80GB", "141": "H200",
}  # fmt: skip
SMALLEST_CARD_MIB = 6 * MIB_PER_GB  # "8 GB or less": down to a 6 GB laptop card


# Answers that end the diagnosis (no OOM to place) rather than change its proposal: never tried as what-ifs
# when the engine decides which questions are worth asking.
NOT_TRIED: dict[str, frozenset[str]] = {"memory_kind": frozenset({"none"})}


def builtin_question(
    key: str, asked_by: str, *, at_least: int | None = None, oom_seen: bool = False
) -> Question:
    """The built-in question ``key`` as the Diagnosis carries it; ``at_least``: only the world sizes a rank
    number in the log leaves possible are offered; ``oom_seen``: a log line shows an OOM (then "it did not run
    out of memory" is not offered)."""
    return Question(
        key=key,
        text=both(f"q_{key}"),
        answers=[Answer(value=v, label=both(f"q_{key}_{v}")) for v in offered(key, at_least, oom_seen)],
        asked_by=asked_by,
    )


def offered(key: str, at_least: int | None = None, oom_seen: bool = False) -> tuple[str, ...]:
    """The answers offered to the built-in question ``key``: all of them, but for the world size only those a
    rank number seen (``at_least`` processes) leaves possible, and for the memory kind no "none" beside a log
    line that shows an OOM."""
    values = BUILTIN_QUESTIONS[key]
    if key == "world_size" and at_least:
        return tuple(v for v in values if int(v) >= at_least)
    if key == "memory_kind" and oom_seen:
        return tuple(v for v in values if v != "none")
    return values


def tried(key: str, values: tuple[str, ...]) -> tuple[str, ...]:
    """``values`` without the answers that end the diagnosis (NOT_TRIED): what a what-if walk tries."""
    skip = NOT_TRIED.get(key, frozenset())
    return tuple(v for v in values if v not in skip)


def said_no_oom(answers: Mapping[str, str]) -> bool:
    """The user answered that the run did not run out of memory (``memory_kind=none``)."""
    return answers.get("memory_kind") == "none"


def checked_answer(answers: Mapping[str, str], key: str) -> str | None:
    """The answer to the built-in question ``key``, once it is one of the values offered (BadInput, the
    usual one line, otherwise: ``card_gb=abc`` is refused before anything converts it)."""
    value = answers.get(key)
    if value is None or value == "":
        return None
    allowed = BUILTIN_QUESTIONS[key]
    if value not in allowed:
        raise BadInput(msg("bad_answer", None, key=key, value=value, allowed=", ".join(allowed)))
    return value


def answered_card_mib(answers: Mapping[str, str]) -> float | None:
    """The card's memory from the ``card_gb`` answer, in MiB: the smallest card of the class the answer names
    (CARD_CLASS_SMALLEST; None when not answered)."""
    value = checked_answer(answers, "card_gb")
    if value is None:
        return None
    if value not in CARD_CLASS_SMALLEST:
        return float(SMALLEST_CARD_MIB)
    from oomdoctor.estimate.cards import card_by_name

    return card_by_name(CARD_CLASS_SMALLEST[value]).total_mib


def answered_world_size(answers: Mapping[str, str], at_least: int = 1) -> int | None:
    """The processes from the ``world_size`` answer (None when not answered); an answer below ``at_least``
    (the processes a rank number in the log proves) is refused: BadInput."""
    value = checked_answer(answers, "world_size")
    if value is None:
        return None
    if int(value) < at_least:
        raise BadInput(msg("world_size_below_ranks", None, value=value, at_least=at_least))
    return int(value)


def yes_no(value: str | None) -> bool | None:
    """A yes/no answer as a bool (``None`` when not answered)."""
    if value is None:
        return None
    return value == "yes"
