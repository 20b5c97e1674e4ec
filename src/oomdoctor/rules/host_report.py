"""A log that stops with no error line right after the run reported its host's RAM as full.

DeepSpeed prints the host's RAM at each stage of its initialisation (``see_memory_usage``); the OOM killer
leaves nothing in the process's own output. So a silent stop (rules/log_stop.py) whose last report shows the
host at or above ``host_ram_full_percent`` (log_markers.yaml) is evidence enough that host memory ran out:
the memory kind is "host" from the log, and the stop counts as an out-of-memory failure. A report well below
that share proves nothing either way (the question stays).
"""

from __future__ import annotations

from oomdoctor.rules.facts import Facts
from oomdoctor.rules.log_stop import log_stop


def host_full_at_stop(facts: Facts) -> bool:
    """The log stops silently before any training step and the run's last host RAM report (printed while it
    set up) was at or above the full share."""
    from oomdoctor.facts.log_host_report import full_percent  # only a log with a host RAM report reads it

    log = facts.log
    if log is None or log.host_ram_percent is None or log.host_ram_percent < full_percent():
        return False
    stop = log_stop(facts.config, log)
    return (
        stop is not None and stop.where == "load"
    )  # a report before training steps is stale at a later stop
