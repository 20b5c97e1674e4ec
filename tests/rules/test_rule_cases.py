"""Every decision node has a case file, tests/rules/cases/<rule id>.yaml, with cases that trigger it and
cases that must not; each case runs the real config and log readers and the engine.

A case: ``config_base``/``config`` (a LLaMA-Factory config), ``log_files``/``log_replace``/``log`` (log text),
optional ``gpu``, ``model``, ``data``, ``estimate``, ``answers``, ``env``, ``log_card_name`` (the card's name as
the log names it), and ``triggers`` (is the file's rule
the proposal or an alternative?) plus ``expect``: ``phase``, ``cause``, ``proposal`` (the first proposal's
rule, or null), ``changes`` (the file's rule's ``{field: [old, new]}``), ``changed_fields``, ``new_values``,
``questions_include``/``questions_exclude`` (question keys), ``findings_include``/``findings_exclude`` (finding ids), ``oom``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rule_cases import CASES_DIR, facts_from_case, load_case_files

from oomdoctor.rules.engine import diagnose, load_rules

CASE_FILES = load_case_files()
CASES = [
    pytest.param(path, data["rule"], case, id=f"{path.stem}:{case['name']}")
    for path, data in CASE_FILES
    for case in data["cases"]
]


def _offered(d: Any) -> list[Any]:
    return ([d.proposal] if d.proposal else []) + list(d.alternatives)


@pytest.mark.parametrize(("path", "rule", "case"), CASES)
def test_case(path: Path, rule: str, case: dict[str, Any]) -> None:
    d = diagnose(facts_from_case(case))
    offered = {p.rule: p for p in _offered(d)}
    assert (rule in offered) is case["triggers"], (
        f"offered: {list(offered)}; findings: {[f.id for f in d.findings]}"
    )
    expect = case.get("expect", {})
    if "oom" in expect:
        assert d.oom is expect["oom"]
    if "phase" in expect:
        assert d.phase == expect["phase"]
    if "cause" in expect:
        assert d.cause == expect["cause"]
    if "proposal" in expect:
        assert (d.proposal.rule if d.proposal else None) == expect["proposal"], f"offered: {list(offered)}"
    if "changes" in expect:
        assert offered[rule].changes == expect["changes"]
    if "changed_fields" in expect:
        assert sorted(offered[rule].changes) == sorted(expect["changed_fields"])
    for field, new in expect.get("new_values", {}).items():
        assert offered[rule].changes[field][1] == new
    asked = [q.key for q in d.questions]
    for key in expect.get("questions_include", []):
        assert key in asked
    for key in expect.get("questions_exclude", []):
        assert key not in asked
    found = {f.id for f in d.findings}
    for fid in expect.get("findings_include", []):
        assert fid in found, f"findings: {sorted(found)}"
    for fid in expect.get("findings_exclude", []):
        assert fid not in found, f"findings: {sorted(found)}"
    if case["triggers"]:
        proposal = offered[rule]
        for text in (proposal.title, proposal.why, proposal.cost, proposal.judge):
            assert text["en"].strip() and text["zh"].strip()


def test_every_rule_has_cases_that_trigger_it_and_cases_that_must_not() -> None:
    by_rule = {data["rule"]: (path, data) for path, data in CASE_FILES}
    missing = [n.node.id for n in load_rules() if n.node.id not in by_rule]
    assert not missing, f"no case file in {CASES_DIR} for: {missing}"
    for loaded in load_rules():
        path, data = by_rule[loaded.node.id]
        assert path.name == f"{loaded.node.id}.yaml"
        flags = [case["triggers"] for case in data["cases"]]
        assert True in flags and False in flags, (
            f"{path.name} needs a case that triggers it and one that must not"
        )


def test_case_files_name_existing_rules() -> None:
    ids = {n.node.id for n in load_rules()}
    for path, data in CASE_FILES:
        assert data["rule"] in ids, f"{path.name} names an unknown rule {data['rule']!r}"
