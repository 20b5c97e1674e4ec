"""Walk the decision nodes over the facts and answer with one Diagnosis: where memory ran out, what filled
it, one proposed change, the alternatives, and what to ask when the files cannot tell.

The engine knows no LLaMA-Factory fact itself: the nodes (rules/*.yaml) say when a change applies and what
it costs. Its parts: ``conditions`` (three-valued evaluation), ``change_ops`` (the registry of change
operators), ``proposals`` (a node made concrete: changes, texts, estimated effect), ``walk`` (the nodes in
rank order), ``asking`` (which questions could change the proposal), ``findings`` (the table of what the
facts show) and ``texts`` (filling rule texts). The facts come assembled (``rules.assemble``).
"""

from __future__ import annotations

from typing import Any

from oomdoctor.diagnosis import Diagnosis, Finding, Proposal, Question
from oomdoctor.facts.account import account_json, account_of
from oomdoctor.facts.types import to_jsonable
from oomdoctor.i18n import both
from oomdoctor.rules.asking import (
    QUESTION_TIERS,
    check_answers,
    choose_questions,
    world_size_question_for,
)
from oomdoctor.rules.conditions import evaluate
from oomdoctor.rules.derive import error_line_missing
from oomdoctor.rules.facts import BATCH_PHASES, Facts
from oomdoctor.rules.findings import fact_findings, without_guarded
from oomdoctor.rules.loader import RuleSet, load_rules
from oomdoctor.rules.proposals import ESTIMATE_PHASE, cause_of
from oomdoctor.rules.questions import BUILTIN_QUESTIONS, builtin_question, said_no_oom
from oomdoctor.rules.walk import Walk, top_rule, walk_rules

__all__ = [
    "diagnose",
    "load_rules",
    "evaluate",
    "walk_rules",
    "choose_questions",
    "RuleSet",
    "Walk",
    "QUESTION_TIERS",
    "ESTIMATE_PHASE",
]

# When no node proposes anything, the phase alone says what most likely filled the memory.
CAUSE_BY_PHASE: dict[str, str] = {
    "load": "weights",
    "first_batch": "activations",
    "long_sample": "activations",
    "eval": "eval_batch",
    "save": "save_copy",
    "optimizer_step": "optimizer_state",
    "unknown": "unknown",
}
# ... and in a batch phase the estimator's largest term says it more precisely.
CAUSE_BY_TERM: dict[str, str] = {
    "logits_loss": "logits",
    "activations": "activations",
    "weights": "weights",
    "trainable_state": "optimizer_state",
}
# The facts the --json summary shows beside the derived ones.
SUMMARY_LOG_FIELDS = (
    "path", "oom_kind", "error_line", "phase", "phase_evidence", "step", "total_steps", "good_steps", "rank",
    "gpu_index", "allocated_mib", "reserved_mib", "alloc_retries", "world_size",
)  # fmt: skip
SUMMARY_CONFIG_FIELDS = (
    "path", "stage", "finetuning_type", "model_name_or_path", "per_device_train_batch_size",
    "per_device_eval_batch_size", "gradient_accumulation_steps", "cutoff_len", "precision",
    "gradient_checkpointing", "quantization_bit", "deepspeed", "zero_stage",
)  # fmt: skip


def diagnose(facts: Facts, rules: RuleSet | None = None) -> Diagnosis:
    """Locate the OOM and propose one change (the lowest-ranked matching node), with alternatives."""
    rules = rules if rules is not None else load_rules()
    check_answers(facts, rules)
    no_oom_said = said_no_oom(facts.answers)
    findings = fact_findings(facts)
    unsaid = error_line_missing(facts) or facts.derived.log_stop is not None
    if not facts.derived.oom and not no_oom_said and unsaid:
        return _no_error_line(facts, findings)
    if not facts.derived.oom:
        said = "no_oom_answered" if no_oom_said else "no_oom"
        findings.insert(0, Finding(id=said, text=both(f"f_{said}")))
        return _diagnosis(facts, oom=False, phase="none", cause="unknown", findings=findings)
    walk = walk_rules(facts, rules)
    findings = without_guarded(findings, facts, frozenset(walk.guarded)) + walk.findings
    if walk.candidates:
        findings += walk.candidates[0][2]  # notes about the proposed change itself
    proposals = walk.proposals
    for p in proposals:
        p.already_on = list(walk.already_on)
    proposal = proposals[0] if proposals else None
    questions = choose_questions(facts, rules, walk)
    cause = _committed_cause(facts, proposal, rules)
    if cause == "unknown" and _cause_hangs_on_world_size(facts):
        questions = world_size_question_for(facts, questions)
    if cause != "unknown" and _an_answer_names_another_cause(facts, rules, questions, cause, walk.top):
        cause = "unknown"  # asked: some answer to a node's own question puts another cause first
    return _diagnosis(
        facts,
        oom=True,
        phase=facts.derived.phase,
        cause=cause,
        findings=findings,
        proposal=proposal,
        alternatives=proposals[1:],
        questions=questions,
    )


def _an_answer_names_another_cause(
    facts: Facts, rules: RuleSet, questions: list[Question], cause: str, current: str | None
) -> bool:
    """Some answer to a node's own open question (``process_owner``, ``run_kind``...) makes a node that names
    another cause than ``cause`` the proposal instead of ``current`` (the walk's top rule). The built-in
    questions are left out: an open memory kind or phase leaves the cause open already, and a card fact only
    picks the change."""
    for question in questions:
        if question.key in BUILTIN_QUESTIONS:
            continue
        for value in rules.questions[question.key].allowed:
            answered = facts.with_answers({question.key: value})
            top = top_rule(answered, rules)
            if top in (None, current):
                continue
            if cause_of(rules.by_id[top].node, answered) not in (cause, "unknown"):
                return True
    return False


def _no_error_line(facts: Facts, findings: list[Finding]) -> Diagnosis:
    """A traceback cut before its error line, or a log that stops with no error line at all: neither is
    evidence of an OOM, so nothing is diagnosed; the finding says where it stops, and which memory ran out and
    where are asked, the first tier as always (an answer makes it an OOM: ``log_failed``). A log that stops
    before the first step, or a traceback whose frames place the phase, has its phase already: there the memory
    kind alone is asked (a placement guessed from missing evidence does not count)."""
    placed = facts.derived.phase if error_line_missing(facts) else "unknown"
    # the first step guessed from missing evidence ("no progress line: taken as the first step") is not a place
    guessed = placed == "first_batch" and facts.log is not None and facts.log.phase_confidence == "low"
    located = facts.derived.log_stop == "load" or (placed != "unknown" and not guessed)
    keys = ["memory_kind"] if located else ["memory_kind", "phase"]
    return _diagnosis(
        facts,
        oom=False,
        phase=placed,
        cause="unknown",
        findings=findings,
        questions=[builtin_question(key, "engine") for key in keys],
    )


def _diagnosis(facts: Facts, **fields: Any) -> Diagnosis:
    """The Diagnosis with the OOM message's numbers and the facts summary every answer carries."""
    log = facts.log
    return Diagnosis(
        step=log.step if log is not None else None,
        requested_mib=log.requested_mib if log is not None else None,
        capacity_mib=facts.derived.capacity_mib,
        free_mib=log.free_mib if log is not None else None,
        reserved_unallocated_mib=log.reserved_unallocated_mib if log is not None else None,
        account=account_json(account_of(log)),
        answers=dict(facts.answers),
        facts=_facts_summary(facts),
        **fields,
    )


def _committed_cause(facts: Facts, proposal: Proposal | None, rules: RuleSet) -> str:
    """What filled the memory, as far as the facts commit to it: while the memory kind is open (asked, or only
    assumed for a cut traceback), no GPU-side cause is said, whatever change is proposed meanwhile."""
    d = facts.derived
    if d.memory_kind is None or (d.memory_kind_source == "assumed" and "memory_kind" not in facts.answers):
        return "unknown"
    if proposal is not None and _names_its_own_cause(proposal, rules):
        return proposal.cause
    phase_cause = _phase_cause(facts)
    if phase_cause is not None:
        return phase_cause
    if _cause_hangs_on_world_size(facts):
        return "unknown"  # the conflict is said (finding) and the world size asked
    return proposal.cause if proposal is not None else _evidence_cause(facts)


def _cause_hangs_on_world_size(facts: Facts) -> bool:
    """In a batch phase, the estimate's largest term differs between the world sizes a ZeRO run may have, and
    nothing states its world size (``derived.dominant_by_world``): neither the activations (what the batch
    changes target) nor the sharded state can be said to have filled the card until it is known."""
    d = facts.derived
    return bool(d.dominant_by_world) and d.phase in BATCH_PHASES and d.memory_kind == "gpu"


def _names_its_own_cause(proposal: Proposal, rules: RuleSet) -> bool:
    """A node that names its cause wherever the memory ran out (``locates.cause_in_any_phase``, or ``phase:
    any``: its own evidence, e.g. a hyperparameter search's frames or another process on the card, tells the
    cause, not the phase) and names one: its cause stands in any phase, the optimizer step's included."""
    loaded = rules.by_id.get(proposal.rule)
    if loaded is None or proposal.cause == "unknown":
        return False
    return loaded.node.locates.cause_in_any_phase


def _phase_cause(facts: Facts) -> str | None:
    """A phase whose frames name what filled the card: the optimizer step (AdamW's update, ``step()``) is the
    optimizer state, whatever the estimate's largest term or a phase-bound change's own cause."""
    d = facts.derived
    if d.phase == "optimizer_step" and d.memory_kind == "gpu":
        return "optimizer_state"
    return None


def _evidence_cause(facts: Facts) -> str:
    d, est = facts.derived, facts.estimate
    if d.memory_kind == "host":
        return "host_ram"
    if d.dominant_cause and d.phase in ("first_batch", "long_sample"):
        return d.dominant_cause  # a logits frame or request, else the estimate's term (derive.py)
    if est is not None and d.phase in ("first_batch", "long_sample"):
        return CAUSE_BY_TERM.get(est.dominant_term, "activations")
    return CAUSE_BY_PHASE.get(d.phase, "unknown")


def _facts_summary(facts: Facts) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "derived": to_jsonable(facts.derived),
        "capacity_mib": facts.derived.capacity_mib,
    }
    if facts.log is not None:
        summary["log"] = {k: to_jsonable(getattr(facts.log, k)) for k in SUMMARY_LOG_FIELDS}
    if facts.config is not None:
        summary["config"] = {k: to_jsonable(getattr(facts.config, k)) for k in SUMMARY_CONFIG_FIELDS}
    if facts.data is not None:
        summary["data"] = to_jsonable(facts.data)
    if facts.estimate is not None:
        summary["estimate"] = to_jsonable(facts.estimate)
    return summary
