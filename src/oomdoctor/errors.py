"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations


class BadInput(Exception):
    """Input the user gave us cannot be used: missing file, malformed YAML, binary log, ...

    The CLI prints ``str(err)`` on one line to stderr and exits 2. Messages carry both languages
    when they are user-facing, e.g. ``BadInput(msg("config_missing", path=p))``.
    """


EXIT_OK = 0
EXIT_FAILED = 1  # the diagnosed run or the trial failed (OOM found, trial crashed)
EXIT_BAD_INPUT = 2
