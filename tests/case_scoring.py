"""Scoring of labelled real threads (the round-4 schema of tests/cases/real_round4.yaml and later rounds), shared
by tests/test_round4_cases.py, tests/test_round5_cases.py and scripts/score_cases.py.

Each case is diagnosed with everything its reporter gave (config fields + log), no answers, and scored:

- **right**: the phase and the cause are those of the label (a negative control: no OOM reported);
- **asked**: nothing it commits to is wrong (phase right or ``unknown``, cause right or ``unknown``) and it asks;
- **wrong**: anything else, including an OOM reported for a negative control or a missed OOM.

Beside it: the numbers of the OOM message (``expected_numbers``; every one, whatever the line breaks of the
excerpt) found by the log reader, and whether the first proposal is of the kind the thread's fix was
(``fix_kinds``; a negative control must get no proposal). Totals are given per ``set`` and per repository.

**After the answers.** The app asks when the files cannot tell, and the user answers. A case may carry the answers
its reporter's own words give (``answers: {phase: eval, memory_kind: gpu}``, with ``answers_why``: where in the
thread they say so), labelled from the thread like the rest. The case is then diagnosed again as a user would
answer: only the questions the tool asked, only with what the thread says, a few rounds at most; that second
verdict is scored the same way. A question the thread does not answer leaves the case asked.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from test_dev_cases import LABEL_TO_PHASE, _case_facts

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
# The target of issue 8 on cases the tool was not tuned on.
TARGET_RIGHT_SHARE = 0.90
TARGET_WRONG_SHARE = 1 / 30

_UNITS = {"B": 1 / 1024**2, "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "TiB": 1024.0**2}
_SIZE = re.compile(r"^\s*([\d.]+)\s*(B|KiB|MiB|GiB|TiB)\s*$")


def mib(text: str) -> float:
    """A size as the OOM message prints it ("136.00 MiB") in MiB."""
    m = _SIZE.match(str(text))
    assert m, f"not a size: {text!r}"
    return float(m.group(1)) * _UNITS[m.group(2)]


# --- one case ------------------------------------------------------------------------------------------------


def diagnosis_of(case: dict[str, Any], answers: dict[str, str] | None = None) -> Any:
    """The diagnosis from the reporter's config fields and the excerpt as the log (none where the thread has
    no log at all, ``no_log: true``; a negative control's log is read like any other), with ``answers`` given
    to the questions."""
    from oomdoctor.facts.log import parse_log_text
    from oomdoctor.facts.model import model_from_name
    from oomdoctor.rules.assemble import facts_of
    from oomdoctor.rules.engine import diagnose

    config, _ = _case_facts(case)
    log = None if case.get("no_log") else parse_log_text(case["log_excerpt"])
    # the model's shape as `diagnose` reads it for a hub id it has no config.json of: the built-in table
    model = model_from_name(config.model_name_or_path) if config is not None else None
    return diagnose(facts_of(config=config, log=log, model=model, answers=answers))


# How many times a user is asked in a row before the scorer stops answering.
ANSWER_ROUNDS = 3


def answered_diagnosis(case: dict[str, Any], first: Any) -> tuple[Any, dict[str, str]]:
    """The diagnosis once the questions it asks are answered from the thread (``case["answers"]``), and the
    answers given. Only asked questions are answered; one the thread does not answer stays open."""
    known = {str(k): str(v) for k, v in (case.get("answers") or {}).items()}
    given: dict[str, str] = {}
    diagnosis = first
    for _ in range(ANSWER_ROUNDS):
        new = {
            q.key: known[q.key]
            for q in diagnosis.questions
            # only a value the question offers: the user picks among its answers (a world size below the ranks
            # a log numbers is not offered)
            if q.key in known and q.key not in given and known[q.key] in {a.value for a in q.answers}
        }
        if not new:
            break
        given.update(new)
        diagnosis = diagnosis_of(case, given)
    return diagnosis, given


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
                ok = any(p == pid and abs(u - mib(size)) < 0.1 for p, u in seen)
                found += ok
                misses += [] if ok else [f"Process {pid}"]
            continue
        stated += 1
        value = getattr(facts, NUMBER_FIELDS[key], None)
        ok = value is not None and abs(value - mib(text)) < 0.1
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


def score_row(case: dict[str, Any], default_set: str) -> dict[str, Any]:
    """One case diagnosed and scored: its verdict, numbers, fix kind and the table line that shows them."""
    diagnosis = diagnosis_of(case)
    mark = verdict(case, diagnosis)
    after, given = answered_diagnosis(case, diagnosis)
    after_mark = verdict(case, after) if given else mark
    got, of, missing = numbers_parsed(case)
    kind = fix_kind_ok(case, diagnosis)
    rule = diagnosis.proposal.rule if diagnosis.proposal else "-"
    label = f"{case['phase']}/{case['cause']}"
    tool = f"{diagnosis.phase}/{diagnosis.cause}" if diagnosis.oom else "no OOM"
    then = f"{after_mark} ({','.join(f'{k}={v}' for k, v in given.items())})" if given else "-"
    line = (
        f"{mark:7}  {case['id']:58}  {label:34}  {tool:30}  {got:>2}/{of:<2}    {'ok' if kind else '--':3}  "
        f"{rule:36}  {then}"
    )
    return {
        "id": case["id"],
        "set": str(case.get("set", default_set)),
        "repo": case["source"]["repo"],
        "mark": mark,
        "after": after_mark,
        "answered": bool(given),
        "found": got,
        "stated": of,
        "fix_ok": kind,
        "misses": [f"{case['id']}: {m}" for m in missing],
        "line": line,
    }


# --- many cases ----------------------------------------------------------------------------------------------


def tally(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """right / asked / wrong, numbers (found, stated) and first proposals of the thread's kind of some rows."""
    rows = list(rows)
    marks = Counter(r["mark"] for r in rows)
    return {
        "right": marks["right"],
        "asked": marks["asked"],
        "wrong": marks["wrong"],
        "total": len(rows),
        "numbers": (sum(r["found"] for r in rows), sum(r["stated"] for r in rows)),
        "fix_ok": sum(r["fix_ok"] for r in rows),
        "after": Counter(r["after"] for r in rows),
        "answered": sum(r["answered"] for r in rows),
    }


def summary(name: str, t: dict[str, Any]) -> str:
    found, stated = t["numbers"]
    return (
        f"{name}: right {t['right']}/{t['total']}, asked {t['asked']}, wrong {t['wrong']}; "
        f"numbers parsed {found}/{stated}; first proposal of the thread's kind {t['fix_ok']}/{t['total']}; "
        f"after answering from the thread ({t['answered']} answered): right {t['after']['right']}, "
        f"asked {t['after']['asked']}, wrong {t['after']['wrong']}"
    )


def target_met(t: dict[str, Any]) -> bool:
    """Issue 8's target: right >= 90 %, wrong <= 1 in 30, every number of every OOM message read."""
    found, stated = t["numbers"]
    return (
        t["right"] >= t["total"] * TARGET_RIGHT_SHARE
        and t["wrong"] <= t["total"] * TARGET_WRONG_SHARE
        and found == stated
    )


def table_header() -> str:
    return (
        f"{'verdict':7}  {'case':58}  {'label phase/cause':34}  {'tool phase/cause':30}  numbers  fix  "
        f"{'first rule':36}  after answers"
    )


def score_rows(cases: list[dict[str, Any]], default_set: str) -> list[dict[str, Any]]:
    """Every case scored (no printing)."""
    return [score_row(case, default_set) for case in cases]


def print_table(rows: list[dict[str, Any]]) -> None:
    """The per-case lines, the unread numbers, the totals per repository and per set, and all of them."""
    print()
    print(table_header())
    for row in rows:
        print(row["line"])
    print(f"unread numbers: {'; '.join(m for r in rows for m in r['misses']) or 'none'}")
    for repo in sorted({r["repo"] for r in rows}):
        counts = tally(r for r in rows if r["repo"] == repo)
        print(f"  {repo:40}  right {counts['right']}  asked {counts['asked']}  wrong {counts['wrong']}")
    for name in sorted({r["set"] for r in rows}):
        print(summary(f"set {name}", tally(r for r in rows if r["set"] == name)))
    totals = tally(rows)
    print(summary("all", totals))
    print(
        f"target (right >= {TARGET_RIGHT_SHARE:.0%}, wrong <= 1 in 30, every number): "
        f"{'met' if target_met(totals) else 'not met'}"
    )


def score(cases: list[dict[str, Any]], default_set: str) -> dict[str, Any]:
    """Diagnose every case, print one row each and the totals per set (a case without ``set`` is in
    ``default_set``); return the totals of all cases."""
    rows = score_rows(cases, default_set)
    print_table(rows)
    return tally(rows)


# --- the file's form -----------------------------------------------------------------------------------------


def case_problems(case: dict[str, Any], sets: set[str], default_set: str) -> list[str]:
    """What is wrong with one case's form (empty: nothing): labels from the schema, a thread URL, its log, the
    numbers of its OOM message as sizes."""
    from oomdoctor.facts.types import CAUSES

    problems: list[str] = []
    url = str(case.get("source", {}).get("url", ""))
    checks = {
        "url is no GitHub thread": url.startswith("https://github.com/"),
        "phase is no label": case.get("phase") in PHASE_LABELS,
        "cause is no label": case.get("cause") in (*CAUSES, "none") and case.get("cause") != "unknown",
        "cause_also is no cause": set(case.get("cause_also", [])) <= set(CAUSES),
        "phase none iff cause none": (case.get("phase") == "none") == (case.get("cause") == "none"),
        "phase_inferred is no bool": isinstance(case.get("phase_inferred"), bool),
        "set is not one of this file's": str(case.get("set", default_set)) in sets,
        "no log_excerpt/resolution/confidence": bool(
            case.get("log_excerpt") and case.get("resolution") and case.get("confidence")
        ),
        "unknown expected_numbers key": set(case.get("expected_numbers") or {})
        <= {*NUMBER_FIELDS, "processes"},
    }
    problems += [f"{case.get('id')}: {what}" for what, ok in checks.items() if not ok]
    problems += answer_problems(case)
    for key, text in (case.get("expected_numbers") or {}).items():
        for size in [s for _, s in text] if key == "processes" else [text]:
            if not _SIZE.match(str(size)):
                problems.append(f"{case.get('id')}: {key} {size!r} is not a size")
    return problems


def answer_problems(case: dict[str, Any]) -> list[str]:
    """The case's ``answers`` name questions the rules ask, with values they allow, and say where the thread
    gives them (``answers_why``)."""
    from oomdoctor.rules.loader import load_rules

    answers = case.get("answers") or {}
    if not answers:
        return []
    questions = load_rules().questions
    problems = [] if case.get("answers_why") else [f"{case.get('id')}: answers without answers_why"]
    for key, value in answers.items():
        spec = questions.get(str(key))
        if spec is None or str(value) not in spec.allowed:
            problems.append(f"{case.get('id')}: answer {key}={value} is not one the questions allow")
    return problems


def thread_url(case: dict[str, Any]) -> str:
    return str(case["source"]["url"]).rstrip("/").lower()


def unknown_fix_kinds(cases: list[dict[str, Any]]) -> list[str]:
    """The kinds of fix (``fix_kinds``) that name no rule of rules/ (nor a family of them, ``family.*``)."""
    from oomdoctor.rules.loader import load_rules

    rule_ids = {loaded.node.id for loaded in load_rules()}
    unknown: list[str] = []
    for case in cases:
        for kind in case.get("fix_kinds") or []:
            known = kind in rule_ids or (
                kind.endswith(".*") and any(r.startswith(kind[:-1]) for r in rule_ids)
            )
            unknown += [] if known else [f"{case['id']}: {kind} is no rule"]
    return unknown


# --- a round's case file --------------------------------------------------------------------------------------

_SEEN_SUFFIXES = {".yaml", ".yml", ".json", ".log", ".txt"}


def seen_text(paths: Iterable[Path], excluding: Path) -> str:
    """The text of the case files and folders' files in ``paths`` (all but ``excluding``), lower-cased: what a new
    round's threads must not repeat."""
    texts = [
        p.read_text(encoding="utf-8", errors="replace")
        for p in paths
        if p.is_file() and p.suffix in _SEEN_SUFFIXES and p != excluding
    ]
    return "\n".join(texts).lower()


def repeated(case: dict[str, Any], seen: str) -> bool:
    """The case's thread (repo and issue number, under either spelling of the owner's repo) is in ``seen``."""
    m = re.search(r"github\.com/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)", thread_url(case))
    assert m, case["id"]
    owner, name, number = m.groups()
    names = {name, "llamafactory", "llama-factory"} if owner == "hiyouga" else {name}
    return any(re.search(rf"{owner}/{n}/(issues|pull|discussions)/{number}\b", seen) for n in names)


def round_file_problems(
    cases: list[dict[str, Any]],
    sets: set[str],
    default_set: str,
    seen: str,
    *,
    min_cases: int,
    min_negative: int,
) -> list[str]:
    """What is wrong with a round's case file (empty: nothing): enough cases, each id and thread once, every case
    well formed (``case_problems``), no thread an earlier file holds, kinds of fix that are rules, enough negative
    controls."""
    ids = [c["id"] for c in cases]
    urls = [thread_url(c) for c in cases]
    problems = [p for case in cases for p in case_problems(case, sets, default_set)]
    problems += [f"{c['id']}: thread already in an earlier case file" for c in cases if repeated(c, seen)]
    problems += unknown_fix_kinds(cases)
    checks = {
        f"fewer than {min_cases} cases": len(cases) >= min_cases,
        "an id appears twice": len(ids) == len(set(ids)),
        "a thread appears twice": len(urls) == len(set(urls)),
        f"fewer than {min_negative} negative controls": sum(c["cause"] == "none" for c in cases)
        >= min_negative,
    }
    return problems + [what for what, ok in checks.items() if not ok]


def floor_misses(
    totals: dict[str, Any], floors: tuple[int, int, int, int], after: tuple[int, int] | None = None
) -> list[str]:
    """The floors a file's totals fall below (empty: none): (right at least, wrong at most, numbers parsed at
    least, first proposals of the thread's kind at least), and after answering (right at least, wrong at most)."""
    right, wrong, numbers, fix_ok = floors
    found, stated = totals["numbers"]
    checks = {
        f"right {totals['right']} below {right}": totals["right"] >= right,
        f"wrong {totals['wrong']} above {wrong}": totals["wrong"] <= wrong,
        f"numbers parsed {found}/{stated} below {numbers}": found >= numbers,
        f"fix kind {totals['fix_ok']} below {fix_ok}": totals["fix_ok"] >= fix_ok,
    }
    if after is not None:
        done = totals["after"]
        checks[f"after answers: right {done['right']} below {after[0]}"] = done["right"] >= after[0]
        checks[f"after answers: wrong {done['wrong']} above {after[1]}"] = done["wrong"] <= after[1]
    return [what for what, ok in checks.items() if not ok]
