"""Every case log in tests/cases/logs/ is read as expected.yaml says: one test per file, field by field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from oomdoctor.facts.log import read_log
from oomdoctor.facts.types import PHASES, LogFacts

CASES_DIR = Path(__file__).resolve().parents[1] / "cases" / "logs"
EXPECTED: dict[str, dict[str, Any]] = yaml.safe_load(
    (CASES_DIR / "expected.yaml").read_text(encoding="utf-8")
)


def test_every_case_log_has_an_expectation_and_back() -> None:
    on_disk = {p.name for p in CASES_DIR.iterdir() if p.name != "expected.yaml"}
    assert on_disk == set(EXPECTED), "case logs and expected.yaml disagree"


def test_the_cases_cover_every_oom_kind_and_phase() -> None:
    kinds = {e.get("oom_kind") for e in EXPECTED.values()}
    phases = {e.get("phase") for e in EXPECTED.values()}
    assert {
        "cuda_oom",
        "cuda_error",
        "cpu_alloc",
        "python_memory",
        "mmap",
        "killed",
        "no_executable_batch",
        "deepspeed",
        "bnb",
    } <= kinds
    assert set(PHASES) <= phases


def _actual(facts: LogFacts, key: str) -> Any:
    if key == "other_processes":
        return [[p.pid, p.used_mib] for p in facts.other_processes]
    return getattr(facts, key)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_case_log(name: str) -> None:
    facts = read_log(CASES_DIR / name)
    expected = {k: v for k, v in EXPECTED[name].items() if k != "covers"}
    wrong = {}
    for key, want in expected.items():
        got = _actual(facts, key)
        ok = abs(got - want) < 0.02 if isinstance(want, float) and isinstance(got, float) else got == want
        if not ok:
            wrong[key] = (want, got)
    assert not wrong, f"{name}: (expected, got) {wrong}; evidence: {facts.phase_evidence}"
    if facts.oom or facts.traceback_cut:
        assert facts.phase_evidence and len(facts.phase_evidence) == len(facts.phase_evidence_text)
        assert all(e["zh"] and e["en"] for e in facts.phase_evidence_text)
