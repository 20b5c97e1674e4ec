"""What the rules engine answers: where memory ran out, what filled it, and one proposed change.

These are the objects behind ``oomdoctor diagnose --json`` (``Diagnosis.to_json()`` is the contract in
ARCHITECTURE.md) and what the TUI shows. Texts are ``oomdoctor.text.Text``; in JSON each is ``{"en": ..., "zh": ...}``.
"""

from __future__ import annotations

from typing import Any

from oomdoctor.facts.types import to_jsonable
from oomdoctor.records import field, record
from oomdoctor.text import Text


@record
class Answer:
    """One offered answer to a question: its value and its label in both languages."""

    value: str
    label: Text


@record
class Question:
    """Something the files cannot tell. ``key`` is what ``--answer key=value`` fills."""

    key: str
    text: Text
    answers: list[Answer]
    asked_by: str  # the rule id that needs it

    @property
    def allowed(self) -> list[str]:
        return [a.value for a in self.answers]


@record
class Finding:
    """One thing the readers or rules noticed, worth telling the user (e.g. "gradient checkpointing is
    already on by default", "the eval batch defaults to 8")."""

    id: str
    text: Text
    severity: str = "info"  # info / warning / error


@record
class EstimatedEffect:
    """The estimator's peak before and after a change (allocated MiB), and whether the result fits."""

    before_mib: float | None = None
    after_mib: float | None = None
    fits_after: bool | None = None  # None when the card's size is unknown
    note: Text | None = None


@record
class Proposal:
    """One change to the config: the rule it comes from, what changes, why, its cost and its estimated effect."""

    rule: str
    title: Text
    changes: dict[str, list[Any]]  # {field: [old, new]}; new None means "remove the key"
    why: Text
    cost: Text
    judge: Text
    cause: str
    already_on: list[Text] = field(default_factory=list)  # what is in effect and must not count again
    effect: EstimatedEffect | None = None
    env: dict[str, str] = field(default_factory=dict)  # environment for the run, e.g. PYTORCH_CUDA_ALLOC_CONF
    files: dict[str, Any] = field(
        default_factory=dict
    )  # extra files to write beside the config (DeepSpeed JSON)
    requires: list[Text] = field(default_factory=list)  # e.g. "bitsandbytes must be installed"
    manual: bool = False  # advice the tool cannot write into the config (another process, host RAM)
    next: list[str] = field(default_factory=list)


@record
class Diagnosis:
    """The answer of `diagnose`: where it ran out, of which memory, the findings, the one proposal and the questions."""

    oom: bool
    phase: str
    cause: str
    step: int | None = None
    requested_mib: float | None = None
    capacity_mib: float | None = None
    free_mib: float | None = None
    reserved_unallocated_mib: float | None = None
    findings: list[Finding] = field(default_factory=list)
    proposal: Proposal | None = None
    alternatives: list[Proposal] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # the facts used, for --json and the TUI facts view
    account: dict[str, Any] | None = None  # the OOM message as an account of the card (facts/account.py)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = to_jsonable(self)
        for q, src in zip(out["questions"], self.questions, strict=True):
            q["allowed"] = src.allowed
        return out
