"""A node's condition tree evaluated over the facts, three-valued: an unknown fact makes a question, not a
guess. The leaves' operators are the registry in ``rules/operators.py``."""

from __future__ import annotations

from oomdoctor.rules import operators
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.nodes import Condition


def evaluate(condition: Condition, facts: Facts) -> bool | None:
    """True, False, or None when an unknown fact decides it."""
    if condition.fact is not None:
        assert condition.op is not None
        return operators.apply(condition.op, facts.get(condition.fact), condition.operand, facts.get)
    if condition.all_ is not None:
        results = [evaluate(c, facts) for c in condition.all_]
        if any(r is False for r in results):
            return False
        return None if any(r is None for r in results) else True
    if condition.any_ is not None:
        results = [evaluate(c, facts) for c in condition.any_]
        if any(r is True for r in results):
            return True
        return None if any(r is None for r in results) else False
    assert condition.not_ is not None
    inner = evaluate(condition.not_, facts)
    return None if inner is None else not inner
