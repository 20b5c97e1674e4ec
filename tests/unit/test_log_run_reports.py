"""The log scanner's gate for the rare run reports lets through every line their readers look for."""

from __future__ import annotations

from oomdoctor.facts import log_data_parallel, log_host_report
from oomdoctor.facts.log_scan import RUN_REPORT_GATE


def test_every_hint_of_a_run_report_passes_the_gate() -> None:
    hints = [log_host_report.HINT, *log_data_parallel.HINTS]
    assert [h for h in hints if not any(g in h for g in RUN_REPORT_GATE)] == []
