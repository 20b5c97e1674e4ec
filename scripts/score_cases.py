"""Score labelled real-thread case files (the round-4 schema) with the oomdoctor on the path.

    PYTHONPATH=src .venv/bin/python scripts/score_cases.py tests/cases/real_round5_lf.yaml [FILE...]

For each file: one line per case (verdict right/asked/wrong, label and tool phase/cause, numbers of the OOM
message read, whether the first proposal is of the thread's kind, the first rule), the unread numbers, the totals
per repository and per ``set``; then, for several files, the totals of all of them per set. The oomdoctor scored
is the one on PYTHONPATH (so another worktree's code can be scored with this script); the scoring helpers are
tests/case_scoring.py of this checkout. A missing or unreadable file: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def _load(path: Path) -> list[dict]:
    import yaml

    try:
        cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SystemExit(_bad(f"{path}: cannot read the case file ({exc.__class__.__name__})")) from None
    if not isinstance(cases, list) or not all(isinstance(c, dict) and "id" in c for c in cases):
        raise SystemExit(_bad(f"{path}: not a list of cases"))
    return cases


def _bad(line: str) -> int:
    print(line, file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="case files (YAML lists of labelled threads)")
    parser.add_argument("--default-set", default="?", help="the set of a case that names none (default '?')")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(TESTS))
    from case_scoring import print_table, score_rows, summary, tally

    every: list[dict] = []
    for path in args.files:
        rows = score_rows(_load(path), args.default_set)
        print(f"\n== {path} ({len(rows)} cases)")
        print_table(rows)
        every += rows
    if len(args.files) > 1:
        print(f"\n== all {len(args.files)} files ({len(every)} cases)")
        for name in sorted({r["set"] for r in every}):
            print(summary(f"set {name}", tally(r for r in every if r["set"] == name)))
        print(summary("all", tally(every)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
