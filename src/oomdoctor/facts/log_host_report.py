"""The host's RAM as the run itself reported it: DeepSpeed's ``see_memory_usage`` prints, at each stage of its
initialisation and around steps, a line ``CPU Virtual Memory:  used = 29.71 GB, percent = 95.3%``.

A log that stops with no error line right after such a report near 100 % was killed for host memory (the OOM
killer leaves nothing in the process's own output); one at 25 % says nothing of the kind. The patterns and the
share that counts as full are data (``host_ram_reports`` / ``host_ram_full_percent`` in log_markers.yaml).
Read line by line by the log scanner (a line holding ``HINT``); the rules decide what it means.
"""

from __future__ import annotations

import re
from functools import lru_cache

from oomdoctor.facts.log_tables import markers_raw
from oomdoctor.lazyre import lazy
from oomdoctor.records import record

# The literal every report line holds (the scanner's needle, log_needles._scanner_needles).
HINT = "CPU Virtual Memory"


@record(frozen=True)
class HostRamReport:
    used_gib: float | None
    percent: float


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], ...]:
    raw = markers_raw()
    return tuple(lazy(entry["pattern"]) for entry in raw.get("host_ram_reports") or ())


@lru_cache(maxsize=1)
def full_percent() -> float:
    """The share of the host's RAM in use from which a report counts as the host being full."""
    return float(markers_raw()["host_ram_full_percent"])


def host_ram_report(line: str) -> HostRamReport | None:
    """The report on one log line, or None."""
    for pattern in _patterns():
        m = pattern.search(line)
        if m is None:
            continue
        percent = _number(m.group("percent"))
        if percent is None or not 0 <= percent <= 100:
            return None
        return HostRamReport(_number(m.groupdict().get("used_gb")), percent)
    return None


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
