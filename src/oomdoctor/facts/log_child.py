"""A launcher's report that a child process failed (torchrun's ``ChildFailedError``, a launcher's
``CalledProcessError``) is the launcher's error, not the run's: when the child's own traceback above it was cut
before its error line (a pasted excerpt), that traceback is the failure, cut, and the phase is where it was; the
launcher's line makes it neither "no OOM" nor a crash of another kind. The words are data
(``child_failure_errors`` and ``launcher_frame_files`` in log_markers.yaml).
"""

from __future__ import annotations

from functools import lru_cache

from oomdoctor.facts.log_tables import markers_raw


@lru_cache(maxsize=1)
def _tables() -> tuple[tuple[str, ...], tuple[str, ...]]:
    raw = markers_raw()
    return tuple(raw.get("child_failure_errors") or ()), tuple(raw.get("launcher_frame_files") or ())


def is_child_failure(error_line: str) -> bool:
    """The error line is a launcher saying one of its children failed."""
    errors, _ = _tables()
    head = error_line.split(":", 1)[0]
    return any(head.endswith(name) for name in errors)


def child_lines(block: list[str]) -> list[str]:
    """The lines of a traceback block before the launcher's own frames (the child's part), or none when the
    block holds no frame outside the launcher."""
    from oomdoctor.facts.log_scan import match_frame_line

    _, launcher_files = _tables()
    child: list[str] = []
    frames = 0
    for line in block:
        m = match_frame_line(line)
        path = m.groupdict().get("path") if m is not None else None
        if path is not None and any(part in path.replace("\\", "/") for part in launcher_files):
            break
        frames += m is not None
        child.append(line)
    return child if frames else []
