"""Print what the oomdoctor on PYTHONPATH outputs for the project's cases, to compare two trees byte for byte.

    PYTHONPATH=OTHER/src python scripts/dump_outputs.py > before.txt
    PYTHONPATH=src python scripts/dump_outputs.py > after.txt && cmp before.txt after.txt

Each case of the labelled case files (tests/cases/oom_cases_dev.yaml, real_*.yaml): its diagnosis as
``--json`` writes it, before and after the thread's answers; then the stdout and exit code of the verbs
(``diagnose --json`` and the text report on the demo and on every log of tests/cases/logs, ``--lengths``,
``estimate --json`` on several cards, ``--help``), run as processes with the same PYTHONPATH. For checking a
change that must not change behaviour (a refactor, a start-up speed-up).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "cases"
DEMO = ["--config", "configs/keywords_clean_train.yaml", "--log", "configs/demo/train.log"]
ESTIMATE = ["estimate", "--config", "configs/keywords_clean_train.yaml", "--json"]


def _cases() -> None:
    import yaml

    sys.path.insert(0, str(ROOT / "tests"))
    from case_scoring import answered_diagnosis, diagnosis_of
    from oomdoctor.facts.types import to_jsonable

    for path in [CASES / "oom_cases_dev.yaml", *sorted(CASES.glob("real_*.yaml"))]:
        for case in yaml.safe_load(path.read_text(encoding="utf-8")):
            first = diagnosis_of(case)
            answered, given = answered_diagnosis(case, first)
            for label, value in (("first", first), ("answered", answered)):
                text = json.dumps(to_jsonable(value), ensure_ascii=False, sort_keys=True)
                print(f"{path.name} {case['id']} {label} {given if label == 'answered' else ''} {text}")


def _verbs() -> list[list[str]]:
    logs = sorted((CASES / "logs").glob("*.log"))
    runs = [["diagnose", *DEMO, "--json"], ["diagnose", *DEMO], ["diagnose", *DEMO, "--lang", "zh"]]
    runs.append(["diagnose", *DEMO, "--lengths", "configs/demo/lengths.json", "--json"])
    runs += [["diagnose", "--log", str(log.relative_to(ROOT)), "--json"] for log in logs]
    runs += [["diagnose", "--config", DEMO[1], "--log", str(log.relative_to(ROOT))] for log in logs]
    runs += [[*ESTIMATE, "--gpu", card] for card in ("V100-32GB", "A100-80GB", "RTX 4090", "no-such-card")]
    runs += [["--help"], ["diagnose", "--help"], ["estimate", "--help"]]
    return runs


def main() -> int:
    _cases()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "XDG_CACHE_HOME": cache}
        for argv in _verbs():
            out = subprocess.run(
                [sys.executable, "-m", "oomdoctor.cli", *argv],
                capture_output=True, text=True, cwd=ROOT, env=env, check=False,
            )  # fmt: skip
            print(f"$ oomdoctor {' '.join(argv)} -> {out.returncode}\n{out.stdout}{out.stderr}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
