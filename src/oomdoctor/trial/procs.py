"""Finding every process a trial started, including those that left its process group, and stopping them.

A launcher's child may ``setsid()`` and double-fork: the grandchild is in another session and process
group, and once the middle process exits its parent is init, so neither ``killpg`` nor a parent-link walk
finds it. Two more ways see it:

- an **environment marker**: the trial's environment carries ``OOMDOCTOR_TRIAL=<random id>``; children
  inherit it through any number of forks and ``setsid``, and ``/proc/<pid>/environ`` shows it (to root and
  to the same user). At the end every process carrying our id is stopped.
- a **cgroup** when this process may make one (root, cgroup v2 or the v1 ``pids`` hierarchy): the launcher
  joins it before it runs (``sh -c 'echo $$ > cgroup.procs; exec ...'``), and nothing it forks can leave.

Both are in addition to the runner's process group and its ``ProcessTreeRss`` snapshot.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Callable
from pathlib import Path

MARKER_VAR = "OOMDOCTOR_TRIAL"
_CGROUP_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup/pids"))


def new_marker() -> str:
    return secrets.token_hex(12)


def marked_pids(marker: str, *, proc_root: Path = Path("/proc")) -> list[int]:
    """Pids whose environment holds ``OOMDOCTOR_TRIAL=<marker>`` (never this process)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found: list[int] = []
    me = os.getpid()
    try:
        entries = list(os.scandir(proc_root))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(os.path.join(entry.path, "environ"), "rb") as f:
                environ = f.read(1 << 20)
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _living(pids: list[int]) -> list[int]:
    """The pids that still run (zombies waiting for a parent's wait() do not)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            out.append(pid)
    return out


def stop_pids(find: Callable[[], list[int]], grace_s: float) -> int:
    """SIGTERM to every pid ``find()`` returns, SIGKILL after ``grace_s`` to those still running, then a few
    rounds of SIGKILL for any that appeared meanwhile. Returns how many were running at first."""
    first = _living(list(find()))
    if not first:
        return 0
    _signal(first, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _living(list(find())):
        time.sleep(0.05)
    for _ in range(50):
        left = _living(list(find()))
        if not left:
            break
        _signal(left, signal.SIGKILL)
        time.sleep(0.05)
    return len(first)


# ---------------------------------------------------------------------------------------------- cgroup


class Cgroup:
    """A cgroup of the trial's own (v2, or v1 ``pids``); ``None`` from ``create`` where we may not make one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, name: str) -> Cgroup | None:
        if os.geteuid() != 0:
            return None
        for root in _CGROUP_ROOTS:
            procs = root / "cgroup.procs"
            if not procs.is_file() or not os.access(root, os.W_OK):
                continue
            _sweep(root)
            path = root / f"oomdoctor-{name}"
            try:
                path.mkdir()
            except OSError:
                continue
            if (path / "cgroup.procs").is_file():
                return cls(path)
            with contextlib.suppress(OSError):
                path.rmdir()
        return None

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started through ``sh`` that first moves itself into the cgroup, then execs ``argv`` (same
        pid): every process it forks is born inside."""
        script = 'echo $$ 2>/dev/null > "$0"; exec "$@"'
        return ["/bin/sh", "-c", script, str(self.path / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(w) for w in text.split() if w.isdigit()]

    def remove(self) -> None:
        """Remove the (then empty) cgroup; retried briefly while the kernel reaps the last members."""
        for _ in range(20):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)


def _sweep(root: Path) -> None:
    """Remove cgroups an earlier trial could not (its last zombies were not yet reaped): ``rmdir`` removes
    only an empty cgroup, so one still in use is left alone."""
    with contextlib.suppress(OSError):
        for old in root.glob("oomdoctor-*"):
            with contextlib.suppress(OSError):
                old.rmdir()


class TrialProcesses:
    """Everything that identifies a trial's processes beyond its process group: the marker, the cgroup."""

    def __init__(self) -> None:
        self.marker = new_marker()
        self.cgroup = Cgroup.create(self.marker)

    @property
    def env(self) -> dict[str, str]:
        return {MARKER_VAR: self.marker}

    def wrap(self, argv: list[str]) -> list[str]:
        return self.cgroup.wrap(argv) if self.cgroup is not None else argv

    def pids(self) -> list[int]:
        found = set(marked_pids(self.marker))
        if self.cgroup is not None:
            found.update(self.cgroup.pids())
        found.discard(os.getpid())
        return sorted(found)

    def stop_all(self, grace_s: float) -> int:
        """Stop every process still carrying the trial's marker or in its cgroup; how many there were."""
        try:
            return stop_pids(self.pids, grace_s)
        finally:
            if self.cgroup is not None:
                self.cgroup.remove()
