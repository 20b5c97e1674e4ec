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

from pathlib import Path

import pytest

from case_scoring import floor_misses, round_file_problems, score, seen_text
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
# After answering the questions the tool asks from the thread: file -> (right at least, wrong at most). BEFORE
# (eacf59a): lf 12 / 4, other 15 / 10 (6 and 6h together). After the session-4 work and its mends (fix7): lf 13 / 2
# (two left wrong: a card whose size no file states, an image resolution the estimate does not model), other 19 / 0.
AFTER_ANSWERS_FLOORS: dict[str, tuple[int, int]] = {
    "real_round6_lf.yaml": (13, 2),
    "real_round6_other.yaml": (19, 0),
}
MIN_CASES = 15
MIN_NEGATIVE_CONTROLS = 2


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_round6_file_is_well_formed_and_new(path: Path) -> None:
    """Every case names a thread no earlier case file holds, a phase and a cause from the labels, kinds of fix
    that are rules, its log and the numbers of its OOM message; at least two negative controls."""
    seen = seen_text(SEEN, excluding=path)
    sets = {"6", "6h"}
    problems = round_file_problems(
        load_cases(path), sets, "6", seen, min_cases=MIN_CASES, min_negative=MIN_NEGATIVE_CONTROLS
    )
    assert problems == []


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_round6_scores_do_not_fall(path: Path) -> None:
    assert path.name in FLOORS, f"{path.name} has no floor: score it (scripts/score_cases.py) and set one"
    totals = score(load_cases(path), "6")
    assert floor_misses(totals, FLOORS[path.name], AFTER_ANSWERS_FLOORS[path.name]) == []
