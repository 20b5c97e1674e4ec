"""The whole diagnosis against tests/cases/real_round9_*.yaml: a ninth round of real public threads (issue 8),
LLaMA-Factory in Chinese and English (real_round9_lf.yaml) and other trainers (real_round9_other.yaml), labelled
from the thread before the tool saw them and scored before any fix of the last part of session 5
(tests/case_scoring.py: right / asked / wrong, numbers of the OOM message read, first proposal of the thread's kind,
and the verdict after answering the tool's questions with the reporter's own words).

Round 9 is the unseen measure of the last part of session 5: the fixers of that part (fix10a, fix10b) work from
rounds 4-8 and never saw these threads. ``pytest -s`` prints the tables; ``scripts/score_cases.py FILE...`` prints the
same for any case file. The floors are the scores measured BEFORE (main 14db1dd, unchanged code): a change that lowers
one is a regression.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from case_scoring import floor_misses, round_file_problems, score, seen_text
from test_dev_cases import load_cases

TESTS = Path(__file__).resolve().parent
CASE_FILES = sorted((TESTS / "cases").glob("real_round9_*.yaml"))
# Files and folders whose threads a new round must not repeat (every earlier round's file included, rounds 7 and 8
# too, besides the other round-9 file).
SEEN = [
    *(TESTS / "cases").glob("*.yaml"),
    *(TESTS / "rules" / "cases").rglob("*"),
    *(TESTS / "watch").rglob("*"),
]

# file -> (right at least, wrong at most, numbers parsed at least, first proposals of the thread's kind at least)
# BEFORE (main 14db1dd, unchanged code): real_round9_lf.yaml (r9lf, 21 cases, set 9) right 6, asked 12, wrong 3,
# numbers 1/1, first proposal of the thread's kind 6/21; after answering from the thread: right 7, asked 10, wrong 4.
# real_round9_other.yaml (r9oth, 27 cases, set 9): right 4, asked 20, wrong 3, numbers 28/29, first proposal of the
# thread's kind 5/27; after answering from the thread: right 16, asked 6, wrong 5.
# After fix10a/fix10b, which never saw round 9 (main de0af38): lf right 6, wrong 2 (after answers 8 / 3); other
# unchanged.
FLOORS: dict[str, tuple[int, int, int, int]] = {
    "real_round9_lf.yaml": (6, 2, 1, 6),
    "real_round9_other.yaml": (4, 3, 28, 5),
}
# After answering the questions the tool asks from the thread: file -> (right at least, wrong at most). BEFORE
# (14db1dd): lf 7 / 4, other 16 / 5.
AFTER_ANSWERS_FLOORS: dict[str, tuple[int, int]] = {
    "real_round9_lf.yaml": (8, 3),
    "real_round9_other.yaml": (16, 5),
}
MIN_CASES = 20
MIN_NEGATIVE_CONTROLS = 2


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_round9_file_is_well_formed_and_new(path: Path) -> None:
    """Every case names a thread no earlier case file holds, a phase and a cause from the labels, kinds of fix
    that are rules, its log and the numbers of its OOM message; at least two negative controls."""
    seen = seen_text(SEEN, excluding=path)
    problems = round_file_problems(
        load_cases(path), {"9"}, "9", seen, min_cases=MIN_CASES, min_negative=MIN_NEGATIVE_CONTROLS
    )
    assert problems == []


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_round9_scores_do_not_fall(path: Path) -> None:
    assert path.name in FLOORS, f"{path.name} has no floor: score it (scripts/score_cases.py) and set one"
    totals = score(load_cases(path), "9")
    assert floor_misses(totals, FLOORS[path.name], AFTER_ANSWERS_FLOORS[path.name]) == []
