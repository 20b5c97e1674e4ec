"""The account line where people read it: the diagnose report, --json, and the TUI facts view (one line)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.report.diagnosis import report
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.tui.render import facts_rows

# LLaMA-Factory's notebook case (tests/cases/logs/notebook_ipython_long_sample.log): the run listed as Process 2193.
MESSAGE = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of "
    "14.74 GiB of which 890.12 MiB is free. Process 2193 has 13.87 GiB memory in use. Of the allocated memory "
    "12.91 GiB is allocated by PyTorch, and 799.47 MiB is reserved by PyTorch but unallocated.\n"
)


def _diagnosed():
    facts = facts_of(log=parse_log_text(MESSAGE))
    return facts, diagnose(facts)


def test_report_and_json_carry_the_account() -> None:
    _, d = _diagnosed()
    assert d.account is not None and d.account["self_pid"] == 2193
    assert d.to_json()["account"]["this_run_source"] == "listed"
    for lang, head in (
        ("en", "Memory on the card: card 15,094 MiB = this run"),
        ("zh", "显存账目: 整卡 15,094 MiB"),
    ):
        lines = [line for line in report(d, lang).splitlines() if "15,094 MiB" in line and "=" in line]
        assert len(lines) == 1 and lines[0].startswith(head), lines


def test_the_tui_facts_view_shows_one_account_line() -> None:
    facts, d = _diagnosed()
    for lang in ("en", "zh"):
        rows = [value for _, value in facts_rows(facts, d, lang) if "15,094 MiB =" in value]
        assert len(rows) == 1 and "\n" not in rows[0]
