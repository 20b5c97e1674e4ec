"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations


class BadInput(Exception):
    """Input the user gave us cannot be used: missing file, malformed YAML, binary log, ...

    The CLI prints ``str(err)`` on one line to stderr and exits 2. Messages carry both languages
    when they are user-facing, e.g. ``BadInput(msg("file_missing", None, what=both("what_log"), path=p))``.
    """


def one_line(text: object) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``), so that an error made
    of a user's value (a file name, an ``--answer``) stays one line."""
    out = str(text)
    if out.isprintable():
        return out
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in out)


EXIT_OK = 0
EXIT_FAILED = 1  # the diagnosed run or the trial failed (OOM found, trial crashed)
EXIT_BAD_INPUT = 2
