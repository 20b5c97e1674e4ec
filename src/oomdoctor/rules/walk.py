"""The walk: every node located at the phase, its condition evaluated, its guards tried, and the ones that
match made into proposals in rank order."""

from __future__ import annotations

from oomdoctor.diagnosis import Finding, Proposal
from oomdoctor.i18n import both
from oomdoctor.records import field, record
from oomdoctor.rules.change_ops import ChangeNotComputable
from oomdoctor.rules.conditions import evaluate
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.loader import LoadedNode, RuleSet
from oomdoctor.rules.nodes import RuleNode
from oomdoctor.rules.proposals import build_proposal
from oomdoctor.rules.texts import render
from oomdoctor.text import Text

Candidate = tuple[RuleNode, Proposal, list[Finding]]


@record
class Walk:
    """What the nodes make of one set of facts: the matching proposals in rank order, what is already on,
    and the nodes an unknown fact left undecided."""

    candidates: list[Candidate] = field(default_factory=list)
    already_on: list[Text] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # guards that held, changes not computable
    guarded: set[str] = field(default_factory=set)  # the fact paths of the guards that held
    undecided: list[LoadedNode] = field(default_factory=list)

    @property
    def proposals(self) -> list[Proposal]:
        return [p for _, p, _ in self.candidates]

    @property
    def top(self) -> str | None:
        return self.candidates[0][1].rule if self.candidates else None


def walk_rules(facts: Facts, rules: RuleSet, *, with_effect: bool = True) -> Walk:
    """Every node located at the phase, in rank order; the fallback nodes only when no other node proposes
    anything (a located GPU OOM always ends with advice). Proposals that would write the very same change
    as a better-ranked one are dropped."""
    walk = Walk()
    for fallback in (False, True):
        if fallback and walk.candidates:
            break
        for loaded in rules:
            node = loaded.node
            if node.fallback is fallback and facts.derived.phase in node.locates.phase:
                _visit(loaded, facts, walk, with_effect)
    walk.candidates.sort(key=lambda item: (item[0].rank, item[0].id))
    walk.candidates = _without_repeats(walk.candidates)
    return walk


def _without_repeats(candidates: list[Candidate]) -> list[Candidate]:
    kept: list[Candidate] = []
    for item in candidates:
        if item[1].manual or not any(_same_change(item[1], other[1]) for other in kept):
            kept.append(item)
    return kept


def _same_change(a: Proposal, b: Proposal) -> bool:
    return (a.changes, a.env, sorted(a.files)) == (b.changes, b.env, sorted(b.files))


def _visit(loaded: LoadedNode, facts: Facts, walk: Walk, with_effect: bool) -> None:
    node = loaded.node
    matched = evaluate(node.when, facts)
    if matched is None:
        walk.undecided.append(loaded)
        return
    if not matched:
        return
    guard = next((g for g in node.guards if evaluate(g.when, facts) is True), None)
    if guard is not None:
        walk.guarded.update(path for path, _ in guard.when.fact_paths())
        reason = render(guard.reason, facts, {})
        if reason not in walk.already_on:
            walk.already_on.append(reason)
            walk.findings.append(Finding(id=f"guard.{node.id}", text=reason))
        return
    try:
        proposal, notes = build_proposal(loaded, facts, with_effect=with_effect)
    except ChangeNotComputable as missing:
        text = both("f_change_not_computable", rule=node.id, field=missing.field)
        walk.findings.append(Finding(id=f"{node.id}.not_computable", text=text, severity="warning"))
        return
    if proposal is not None:
        walk.candidates.append((node, proposal, notes))


def top_rule(facts: Facts, rules: RuleSet) -> str | None:
    """``walk_rules(facts, rules, with_effect=False).top``, found without walking past it: the nodes in rank
    order, the first one that proposes something is the top one (a later node can neither come before it nor
    drop it). What-if questions ask this of many answer sets and need nothing else of the walk."""
    for fallback in (False, True):
        located = [
            loaded
            for loaded in rules
            if loaded.node.fallback is fallback and facts.derived.phase in loaded.node.locates.phase
        ]
        for loaded in sorted(located, key=lambda item: (item.node.rank, item.node.id)):
            proposal = _proposal_of(loaded, facts)
            if proposal is not None:
                return proposal.rule
    return None


def _proposal_of(loaded: LoadedNode, facts: Facts) -> Proposal | None:
    """What the node proposes for these facts (no effect computed), None when it proposes nothing."""
    node = loaded.node
    if evaluate(node.when, facts) is not True:
        return None
    if any(evaluate(g.when, facts) is True for g in node.guards):
        return None
    try:
        proposal, _ = build_proposal(loaded, facts, with_effect=False)
    except ChangeNotComputable:
        return None
    return proposal
