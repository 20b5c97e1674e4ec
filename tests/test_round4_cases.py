"""The whole diagnosis against tests/cases/real_round4.yaml: a fourth round of real public threads, labelled
from the thread (phase, cause, the kind of fix, every number of the OOM message) before the tool saw them.

Scored per case with everything its reporter gave (config fields + log), no answers:

- **right**: the phase and the cause are those of the label (a negative control: no OOM reported);
- **asked**: nothing it commits to is wrong (phase right or ``unknown``, cause right or ``unknown``) and it asks;
- **wrong**: anything else, including an OOM reported for a negative control or a missed OOM.

Beside it: the numbers of the OOM message (``expected_numbers``; every one, whatever the line breaks of the
excerpt) found by the log reader, and whether the first proposal is of the kind the thread's fix was
(``fix_kinds``; a negative control must get no proposal). ``pytest -s`` prints the tables; the scores before and
after the capability work are in the case file's header. The floors below are the measured scores: a change that
lowers one is a regression on real reports the tool was not written against.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from oomdoctor.facts.types import CAUSES
from test_dev_cases import LABEL_TO_PHASE, _case_facts, load_cases, located_or_asked

CASES = Path(__file__).resolve().parent / "cases" / "real_round4.yaml"
EARLIER = ("real_extra.yaml", "real_holdout.yaml")

# Floors at the scores measured AFTER the issue-8 capability work (main at ea7db4a, diag landed; all 59 cases: right 24, asked 26,
# wrong 9, 200/200 numbers, 27/59 first proposals of the thread's kind). BEFORE it (1014eba / 0ed131a) the same
# cases scored right 15, asked 18, wrong 26, 189/200 numbers, 19/59. Raised after diag's second pass (no error line,
# Ray host RAM, optimizer-step cause, step/load/save frames, logits by size; the scorer reads the model table):
# right 32, asked 23, wrong 4, 200/200, 36/59. A change that lowers one is a regression.
REQUIRED_RIGHT = 32
MAX_WRONG = 4
REQUIRED_NUMBERS_PARSED = 200
REQUIRED_FIX_KIND = 36
# The target of issue 8 on cases the tool was not tuned on (printed beside the score, not asserted here).
TARGET_RIGHT_SHARE = 0.90
TARGET_WRONG_SHARE = 1 / 30
# The earlier project sets scored the same way (phase labels only): (right at least, wrong at most).
EARLIER_FLOORS = {"real_extra.yaml": (17, 0), "real_holdout.yaml": (14, 1)}

PHASE_LABELS = {
    "load",
    "first_batch",
    "mid_train_long_sample",
    "eval",
    "save",
    "optimizer_step",
    "other",
    "none",
}
# expected_numbers key -> LogFacts field
NUMBER_FIELDS = {
    "requested": "requested_mib",
    "capacity": "capacity_mib",
    "free": "free_mib",
    "this_process": "process_in_use_mib",
    "allocated": "allocated_mib",
    "reserved": "reserved_mib",
    "reserved_unallocated": "reserved_unallocated_mib",
    # Stated by some messages, with no LogFacts field today (counted unread until the reader keeps them):
    "allowed": "allowed_mib",  # old format "11.93 GiB allowed" (a per-process memory fraction)
    "private_pools": "private_pools_mib",  # "with N allocated in private pools (e.g., CUDA Graphs)"
    "current_active": "current_active_mib",  # Ascend NPU "N current active"
}
_UNITS = {"B": 1 / 1024**2, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "TiB": 1024.0**2}
_SIZE = re.compile(r"^\s*([\d.]+)\s*(B|KiB|MiB|GiB|TiB)\s*$")


def _mib(text: str) -> float:
    m = _SIZE.match(str(text))
    assert m, f"not a size: {text!r}"
    return float(m.group(1)) * _UNITS[m.group(2)]


def _cases() -> list[dict[str, Any]]:
    return load_cases(CASES)


# --- the three scores --------------------------------------------------------------------------------------


def _diagnosis(case: dict[str, Any]) -> Any:
    """The diagnosis from the reporter's config fields and the excerpt as the log (none where the thread has
    no log at all, ``no_log: true``; a negative control's log is read like any other)."""
    from oomdoctor.facts.log import parse_log_text
    from oomdoctor.facts.model import model_from_name
    from oomdoctor.rules.assemble import facts_of
    from oomdoctor.rules.engine import diagnose

    config, _ = _case_facts(case)
    log = None if case.get("no_log") else parse_log_text(case["log_excerpt"])
    # the model's shape as `diagnose` reads it for a hub id it has no config.json of: the built-in table
    model = model_from_name(config.model_name_or_path) if config is not None else None
    return diagnose(facts_of(config=config, log=log, model=model))


def verdict(case: dict[str, Any], diagnosis: Any) -> str:
    """right / asked / wrong for one case (see the module docstring)."""
    if case["cause"] == "none":
        return "right" if not diagnosis.oom else "wrong"
    if not diagnosis.oom:
        # "no error line" (a cut traceback) answers nothing and asks; a plain "no OOM" is wrong.
        return "asked" if diagnosis.questions else "wrong"
    label = case["phase"]
    phase_ok = label == "other" or diagnosis.phase == LABEL_TO_PHASE.get(label, label)
    cause_ok = diagnosis.cause in {case["cause"], *case.get("cause_also", [])}
    if phase_ok and cause_ok:
        return "right"
    phase_open = diagnosis.phase == "unknown"
    cause_open = diagnosis.cause == "unknown"
    if (phase_ok or phase_open) and (cause_ok or cause_open) and diagnosis.questions:
        return "asked"
    return "wrong"


def numbers_parsed(case: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(found, stated, misses) for the numbers of the case's OOM message."""
    from oomdoctor.facts.log import parse_log_text

    expected = case.get("expected_numbers") or {}
    if not expected:
        return 0, 0, []
    facts = parse_log_text(case["log_excerpt"])
    found = stated = 0
    misses: list[str] = []
    for key, text in expected.items():
        if key == "processes":
            seen = [(p.pid, p.used_mib) for p in facts.other_processes]
            for pid, size in text:
                stated += 1
                ok = any(p == pid and abs(u - _mib(size)) < 0.1 for p, u in seen)
                found += ok
                misses += [] if ok else [f"Process {pid}"]
            continue
        stated += 1
        value = getattr(facts, NUMBER_FIELDS[key], None)
        ok = value is not None and abs(value - _mib(text)) < 0.1
        found += ok
        misses += [] if ok else [f"{key} {text} (read {value})"]
    return found, stated, misses


def fix_kind_ok(case: dict[str, Any], diagnosis: Any) -> bool:
    """The first proposal is of a kind the thread's fix was; a negative control gets none."""
    rule = diagnosis.proposal.rule if diagnosis.proposal else None
    kinds = case.get("fix_kinds") or []
    if not kinds:
        return rule is None
    return rule is not None and any(
        rule == kind or (kind.endswith(".*") and rule.startswith(kind[:-1])) for kind in kinds
    )


def _row(case: dict[str, Any]) -> dict[str, Any]:
    """One case diagnosed and scored, printed as one line."""
    diagnosis = _diagnosis(case)
    mark = verdict(case, diagnosis)
    got, of, missing = numbers_parsed(case)
    kind = fix_kind_ok(case, diagnosis)
    rule = diagnosis.proposal.rule if diagnosis.proposal else "-"
    label = f"{case['phase']}/{case['cause']}"
    tool = f"{diagnosis.phase}/{diagnosis.cause}" if diagnosis.oom else "no OOM"
    print(
        f"{mark:7}  {case['id']:58}  {label:34}  {tool:30}  {got:>2}/{of:<2}    {'ok' if kind else '--':3}  {rule}"
    )
    return {
        "set": str(case.get("set", "4")),
        "repo": case["source"]["repo"],
        "mark": mark,
        "found": got,
        "stated": of,
        "fix_ok": kind,
        "misses": [f"{case['id']}: {m}" for m in missing],
    }


def _tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    marks = Counter(r["mark"] for r in rows)
    return {
        "right": marks["right"],
        "asked": marks["asked"],
        "wrong": marks["wrong"],
        "total": len(rows),
        "numbers": (sum(r["found"] for r in rows), sum(r["stated"] for r in rows)),
        "fix_ok": sum(r["fix_ok"] for r in rows),
    }


def _summary(name: str, t: dict[str, Any]) -> str:
    found, stated = t["numbers"]
    return (
        f"{name}: right {t['right']}/{t['total']}, asked {t['asked']}, wrong {t['wrong']}; "
        f"numbers parsed {found}/{stated}; first proposal of the thread's kind {t['fix_ok']}/{t['total']}"
    )


def score(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Diagnose every case, print one row each and the totals per set (``set``: "4", or "4b" for the threads
    held out of every tree until the capability work had landed); return the totals of all cases."""
    print()
    print(
        f"{'verdict':7}  {'case':58}  {'label phase/cause':34}  {'tool phase/cause':30}  numbers  fix  first rule"
    )
    rows = [_row(case) for case in cases]
    print(f"unread numbers: {'; '.join(m for r in rows for m in r['misses']) or 'none'}")
    for repo in sorted({r["repo"] for r in rows}):
        counts = _tally([r for r in rows if r["repo"] == repo])
        print(f"  {repo:40}  right {counts['right']}  asked {counts['asked']}  wrong {counts['wrong']}")
    for name in sorted({r["set"] for r in rows}):
        print(_summary(f"round {name}", _tally([r for r in rows if r["set"] == name])))
    totals = _tally(rows)
    print(_summary("all", totals))
    found, stated = totals["numbers"]
    met = (
        totals["right"] >= totals["total"] * TARGET_RIGHT_SHARE
        and totals["wrong"] <= totals["total"] * TARGET_WRONG_SHARE
        and found == stated
    )
    print(
        f"target (right >= {TARGET_RIGHT_SHARE:.0%}, wrong <= 1 in 30, every number): {'met' if met else 'not met'}"
    )
    return totals


# --- the tests -----------------------------------------------------------------------------------------------


def test_round4_cases_file_is_well_formed() -> None:
    """Every case names its thread (none of the earlier sets' threads), a phase and a cause from the labels, the
    kinds of fix, its log and the numbers of its OOM message; at least four negative controls."""
    cases = _cases()
    assert len(cases) >= 40
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    earlier = [c for name in EARLIER for c in load_cases(CASES.parent / name)]
    earlier_urls = {str(c.get("source", {}).get("url", "")).rstrip("/").lower() for c in earlier}
    urls = [c["source"]["url"].rstrip("/").lower() for c in cases]
    assert len(urls) == len(set(urls)), "a thread appears twice"
    for case, url in zip(cases, urls, strict=True):
        assert url.startswith("https://github.com/") and url not in earlier_urls, case["id"]
        assert case["phase"] in PHASE_LABELS, case["id"]
        assert case["cause"] in (*CAUSES, "none") and case["cause"] != "unknown", case["id"]
        assert set(case.get("cause_also", [])) <= set(CAUSES), case["id"]
        assert (case["phase"] == "none") == (case["cause"] == "none"), case["id"]
        assert isinstance(case["phase_inferred"], bool), case["id"]
        assert str(case.get("set", "4")) in {"4", "4b"}, case["id"]
        assert case["log_excerpt"] and case["resolution"] and case["confidence"], case["id"]
        assert set(case.get("expected_numbers") or {}) <= {*NUMBER_FIELDS, "processes"}, case["id"]
        for key, text in (case.get("expected_numbers") or {}).items():
            for size in [s for _, s in text] if key == "processes" else [text]:
                _mib(size)
    assert sum(c["cause"] == "none" for c in cases) >= 4, "at least four negative controls"


def test_round4_fix_kinds_name_rules_that_exist() -> None:
    """Every kind of fix a case accepts is a rule of rules/ (or a family of them, ``family.*``)."""
    from oomdoctor.rules.loader import load_rules

    rule_ids = {loaded.node.id for loaded in load_rules()}
    for case in _cases():
        for kind in case.get("fix_kinds") or []:
            known = kind in rule_ids or (
                kind.endswith(".*") and any(r.startswith(kind[:-1]) for r in rule_ids)
            )
            assert known, f"{case['id']}: {kind} is no rule"


def test_round4_scores_do_not_fall() -> None:
    totals = score(_cases())
    found, stated = totals["numbers"]
    assert totals["right"] >= REQUIRED_RIGHT, f"right {totals['right']} below {REQUIRED_RIGHT}"
    assert totals["wrong"] <= MAX_WRONG, f"wrong {totals['wrong']} above {MAX_WRONG}"
    assert found >= REQUIRED_NUMBERS_PARSED, (
        f"numbers parsed {found}/{stated} below {REQUIRED_NUMBERS_PARSED}"
    )
    assert totals["fix_ok"] >= REQUIRED_FIX_KIND, f"fix kind {totals['fix_ok']} below {REQUIRED_FIX_KIND}"


@pytest.mark.parametrize("name", EARLIER)
def test_earlier_sets_scored_the_same_way(name: str) -> None:
    """The earlier project sets (phase labels only: they hold no cause labels) as right / asked / wrong,
    printed beside round 4, must not fall below what they scored when round 4 was collected."""
    located, asked, wrong = located_or_asked(load_cases(CASES.parent / name))
    print(f"{name}: right {located}, asked {asked}, wrong {wrong}")
    floor_right, ceiling_wrong = EARLIER_FLOORS[name]
    assert located >= floor_right and wrong <= ceiling_wrong, (name, located, asked, wrong)
