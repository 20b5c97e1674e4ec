"""A card held by another job: freeing it is the proposal whatever the phase, and the phase is asked beside it
(whether the run fits once the card is free depends on where it ran out: rules/asking.PHASE_ASKED_BESIDE)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# A 24 GiB card shared with an inference server left running: this process holds 3.1 GiB, another 19.7 GiB.
SHARED_CARD = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of "
    "23.64 GiB of which 118.50 MiB is free. Process 40211 has 19.71 GiB memory in use. Including non-PyTorch "
    "memory, this process has 3.10 GiB memory in use. Of the allocated memory 2.61 GiB is allocated by "
    "PyTorch, and 61.20 MiB is reserved by PyTorch but unallocated.\n"
)


def test_a_stranger_on_the_card_is_the_cause_and_the_phase_is_still_asked() -> None:
    diagnosis = diagnose(facts_of(log=parse_log_text(SHARED_CARD)))
    assert diagnosis.oom and diagnosis.cause == "other_process" and diagnosis.phase == "unknown"
    assert diagnosis.proposal is not None and diagnosis.proposal.rule == "other_process.free_the_card"
    assert [q.key for q in diagnosis.questions] == ["phase"]


def test_once_the_phase_is_answered_nothing_more_is_asked_for_it() -> None:
    diagnosis = diagnose(facts_of(log=parse_log_text(SHARED_CARD), answers={"phase": "first_batch"}))
    assert diagnosis.proposal is not None and diagnosis.proposal.rule == "other_process.free_the_card"
    assert "phase" not in [q.key for q in diagnosis.questions]
