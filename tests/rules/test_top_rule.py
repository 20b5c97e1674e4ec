"""walk.top_rule, the top rule found without walking past it (what the questions' what-ifs ask), names the
same rule as the whole walk, on every rule case and with every answer to where it ran out."""

from __future__ import annotations

from typing import Any

import pytest
from rule_cases import facts_from_case, load_case_files

from oomdoctor.rules.engine import load_rules
from oomdoctor.rules.walk import top_rule, walk_rules

CASES = [
    pytest.param(case, id=f"{path.stem}:{case['name']}")
    for path, data in load_case_files()
    for case in data["cases"]
]


@pytest.mark.parametrize("case", CASES)
def test_the_top_rule_is_the_walk_s_top(case: dict[str, Any]) -> None:
    rules = load_rules()
    facts = facts_from_case(case)
    variants = [facts] + [facts.with_answers({"phase": v}) for v in rules.questions["phase"].allowed]
    for each in variants:
        assert top_rule(each, rules) == walk_rules(each, rules, with_effect=False).top, each.answers
