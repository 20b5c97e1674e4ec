"""The whole diagnosis against tests/cases/real_round6_*.yaml: a sixth round of real public threads (issue 8),
LLaMA-Factory in Chinese and English (real_round6_lf.yaml) and other trainers (real_round6_other.yaml), labelled
from the thread before the tool saw them and scored before any capability work (tests/case_scoring.py: right /
asked / wrong, numbers of the OOM message read, first proposal of the thread's kind, and the verdict after answering
the tool's questions with the reporter's own words).

A third of the threads collected were kept out of git (set 6h) so the capability work cannot be tuned on them; the
committed ones are set 6. ``pytest -s`` prints the tables; ``scripts/score_cases.py FILE...`` prints the same for
any case file. The floors are the scores measured BEFORE the capability work (main eacf59a): a change that lowers
one is a regression; the capability work raises them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from case_scoring import case_problems, score, thread_url, unknown_fix_kinds
from test_dev_cases import load_cases

TESTS = Path(__file__).resolve().parent
CASE_FILES = sorted((TESTS / "cases").glob("real_round6_*.yaml"))
# Files and folders whose threads a new round must not repeat (the round-5 files and every earlier one included,
# besides the other round-6 file).
SEEN = [
    *(TESTS / "cases").glob("*.yaml"),
    *(TESTS / "rules" / "cases").rglob("*"),
    *(TESTS / "watch").rglob("*"),
]

# file -> (right at least, wrong at most, numbers parsed at least, first proposals of the thread's kind at least)
# BEFORE (main eacf59a, unchanged code): real_round6_lf.yaml (r6lf, 17 cases, set 6) right 7, asked 10, wrong 0,
# numbers 6/6, first proposal of the thread's kind 6/17; after answering from the thread: right 8, asked 6, wrong 3.
# real_round6_other.yaml (r6oth, 25 cases, set 6): right 4, asked 17, wrong 4, numbers 38/40, fix kind 5/25; after
# answering from the thread: right 12, asked 6, wrong 7.
# The capability work raises these.
# diag6c (issue 8 capabilities from set 6): real_round6_other.yaml right 5, wrong 0, numbers 40/40, fix kind 6/25
# (after answering: right 14, asked 8, wrong 3); real_round6_lf.yaml unchanged at its floor.
# Set 6h (20 threads held out of git while diag6a, diag6b and diag6c worked, r6lf 8 + r6oth 12) appended to both
# files once scored AFTER; the floors are now of each whole file (6 + 6h). 6h BEFORE (eacf59a): lf right 4, asked 3,
# wrong 1; other right 1, asked 9, wrong 2 (after answering: lf 4/3/1, other 3/6/3). 6h AFTER (62339c4, never shown
# 6h): lf 4/4/0, other 1/10/1 (after answering: lf 4/4/0, other 4/7/1).
# fix7: a log that stops after the DeepSpeed launcher's lines is a stop in the set-up (dolly-89 wrong -> asked):
# real_round6_other.yaml 6/31/0 (after answering: right 18, asked 17, wrong 2).
FLOORS: dict[str, tuple[int, int, int, int]] = {
    "real_round6_lf.yaml": (11, 0, 7, 10),
    "real_round6_other.yaml": (6, 0, 50, 8),
}
MIN_CASES = 15
MIN_NEGATIVE_CONTROLS = 2


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _seen_text(excluding: Path) -> str:
    """The text of every earlier case file (and the other round-6 file), lower-cased."""
    texts = [
        p.read_text(encoding="utf-8", errors="replace")
        for p in SEEN
        if p.is_file() and p.suffix in {".yaml", ".yml", ".json", ".log", ".txt"} and p != excluding
    ]
    return "\n".join(texts).lower()


def _repeated(case: dict[str, Any], seen: str) -> bool:
    """The case's thread (repo and issue number, under either spelling of the owner's repo) is in ``seen``."""
    m = re.search(r"github\.com/([^/]+)/([^/]+)/(?:issues|pull|discussions)/(\d+)", thread_url(case))
    assert m, case["id"]
    owner, name, number = m.groups()
    names = {name, "llamafactory", "llama-factory"} if owner == "hiyouga" else {name}
    return any(re.search(rf"{owner}/{n}/(issues|pull|discussions)/{number}\b", seen) for n in names)


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_round6_file_is_well_formed_and_new(path: Path) -> None:
    """Every case names a thread no earlier case file holds, a phase and a cause from the labels, kinds of fix
    that are rules, its log and the numbers of its OOM message; at least two negative controls."""
    cases = load_cases(path)
    assert len(cases) >= MIN_CASES
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    urls = [thread_url(c) for c in cases]
    assert len(urls) == len(set(urls)), "a thread appears twice"
    assert [p for case in cases for p in case_problems(case, {"6", "6h"}, "6")] == []
    seen = _seen_text(excluding=path)
    assert [c["id"] for c in cases if _repeated(c, seen)] == [], "threads already in an earlier case file"
    assert unknown_fix_kinds(cases) == []
    assert sum(c["cause"] == "none" for c in cases) >= MIN_NEGATIVE_CONTROLS


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_round6_scores_do_not_fall(path: Path) -> None:
    assert path.name in FLOORS, f"{path.name} has no floor: score it (scripts/score_cases.py) and set one"
    right, wrong, numbers, fix_ok = FLOORS[path.name]
    totals = score(load_cases(path), "6")
    found, stated = totals["numbers"]
    assert totals["right"] >= right, f"right {totals['right']} below {right}"
    assert totals["wrong"] <= wrong, f"wrong {totals['wrong']} above {wrong}"
    assert found >= numbers, f"numbers parsed {found}/{stated} below {numbers}"
    assert totals["fix_ok"] >= fix_ok, f"fix kind {totals['fix_ok']} below {fix_ok}"
