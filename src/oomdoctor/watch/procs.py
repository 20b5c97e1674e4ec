"""The training's processes and the memory they can run out of, read through psutil and /proc. Never signals.

A run is found by its command line: an argument that names the config file (resolved from the process's own
working folder) or its ``output_dir``. Our own process and its ancestors are skipped (``oomdoctor watch
--config C`` names the config too), and of the matches only the topmost are kept: a launcher's children
belong to it. With ``--pid`` the tree under that pid is followed.

Host memory has three limits, and the one with the least room left is the one a run meets first: the
process's address-space limit (``RLIMIT_AS``, what ``prlimit --as`` sets, compared with its virtual size),
the cgroup's memory limit (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``, compared with what the cgroup
is charged), and the host's available RAM.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
CGROUP_ROOT = Path("/sys/fs/cgroup")
# Values above this are "no limit" (cgroup v1 writes a huge page-rounded number instead of "max").
UNLIMITED_BYTES = 1 << 60


@dataclass(frozen=True)
class HostLimit:
    """One host-memory limit: what it allows, what counts against it now."""

    source: str  # "rlimit_as" / "cgroup" / "host"
    limit_mib: float
    used_mib: float
    pid: int | None = None  # the process the limit belongs to (rlimit_as)

    @property
    def left_mib(self) -> float:
        return self.limit_mib - self.used_mib


def _resolve(arg: str, cwd: str | None) -> str | None:
    """The path an argument names, absolute: ``train.yaml``, ``output_dir=saves/x``, ``--config=c.yaml``."""
    key, sep, value = arg.partition("=")
    if sep and "/" not in key:
        arg = value
    if not arg or arg.startswith("-"):
        return None
    path = Path(arg)
    if not path.is_absolute():
        if cwd is None:
            return None
        path = Path(cwd) / path
    return os.path.normpath(str(path))


def _own_lineage() -> set[int]:
    import psutil

    pids = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        pids.update(p.pid for p in psutil.Process().parents())
    return pids


def command_names(proc: Any, targets: set[str]) -> bool:
    """True when one of the process's arguments names one of ``targets`` (normalised absolute paths)."""
    import psutil

    try:
        cmdline = proc.cmdline()
    except psutil.Error:
        return False
    if not any(Path(t).name in " ".join(cmdline) for t in targets):  # cheap filter before cwd lookups
        return False
    try:
        cwd = proc.cwd()
    except psutil.Error:
        cwd = None
    return any(_resolve(arg, cwd) in targets for arg in cmdline[1:])


def _mentions(pid: int, names: list[bytes]) -> bool:
    """A cheap first look: does the raw command line hold one of the file names? (Linux ``/proc``; elsewhere
    every process goes on to the full check.)"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return not os.path.isdir("/proc")
    except OSError:
        return False
    return any(name in raw for name in names)


def find_training(config: str | None, output_dir: str | None) -> list[int]:
    """Pids of the topmost processes whose command line names the config or the output folder."""
    import psutil

    targets = {os.path.normpath(os.path.abspath(p)) for p in (config, output_dir) if p}
    if not targets:
        return []
    names = [os.fsencode(Path(t).name) for t in targets]
    skip = _own_lineage()
    found: dict[int, int] = {}
    for pid in psutil.pids():
        if pid in skip or not _mentions(pid, names):
            continue
        try:
            proc = psutil.Process(pid)
            if command_names(proc, targets):
                found[pid] = proc.ppid()
        except psutil.Error:
            continue
    return sorted(pid for pid, ppid in found.items() if ppid not in found)


class ProcessTree:
    """The processes under some root pids, re-listed every ``refresh_every`` reads (children come and go)."""

    def __init__(self, roots: list[int], refresh_every: int = 5) -> None:
        import psutil

        self._psutil = psutil
        self.roots: dict[int, Any] = {}
        for pid in roots:
            with contextlib.suppress(psutil.Error):
                self.roots[pid] = psutil.Process(pid)
        self._members: dict[int, Any] = dict(self.roots)
        self._refresh_every = refresh_every
        self._reads = 0

    def _alive(self, proc: Any) -> bool:
        try:
            return bool(proc.is_running() and proc.status() != self._psutil.STATUS_ZOMBIE)
        except self._psutil.Error:
            return False

    def members(self) -> list[Any]:
        """Living processes of the tree (roots and descendants)."""
        if self._reads % self._refresh_every == 0:
            for root in list(self.roots.values()):
                with contextlib.suppress(self._psutil.Error):
                    for child in root.children(recursive=True):
                        self._members.setdefault(child.pid, child)
        self._reads += 1
        living = [p for p in self._members.values() if self._alive(p)]
        self._members = {p.pid: p for p in living}
        return living

    @property
    def pids(self) -> set[int]:
        return set(self._members)


def rlimit_as_mib(proc: Any) -> float | None:
    """The process's address-space limit in MiB, ``None`` when unlimited or unreadable."""
    import psutil

    try:
        soft, _hard = proc.rlimit(psutil.RLIMIT_AS)
    except (psutil.Error, AttributeError, OSError):
        return None
    if soft in (-1, psutil.RLIM_INFINITY) or soft >= UNLIMITED_BYTES:
        return None
    return float(soft) / MIB


def _read_bytes(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value < UNLIMITED_BYTES else None


def cgroup_limit(pid: int, root: Path = CGROUP_ROOT) -> HostLimit | None:
    """The memory limit of the process's cgroup (v2 or v1), with what the cgroup is charged now."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        if controllers == "":
            folder, limit_name, usage_name = root / rel, "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            folder, limit_name, usage_name = (
                root / "memory" / rel,
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        else:
            continue
        limit = _read_bytes(folder / limit_name)
        usage = _read_bytes(folder / usage_name)
        if limit is not None and usage is not None:
            return HostLimit("cgroup", limit / MIB, usage / MIB)
    return None


def host_limits(procs: list[Any]) -> list[HostLimit]:
    """Every host-memory limit the run's processes are under, the host's own RAM last."""
    import psutil

    limits: list[HostLimit] = []
    for proc in procs:
        cap = rlimit_as_mib(proc)
        if cap is None:
            continue
        try:
            vms = proc.memory_info().vms / MIB
        except psutil.Error:
            continue
        limits.append(HostLimit("rlimit_as", cap, vms, pid=proc.pid))
    if procs:
        cg = cgroup_limit(procs[0].pid)
        if cg is not None:
            limits.append(cg)
    vm = psutil.virtual_memory()
    limits.append(HostLimit("host", vm.total / MIB, (vm.total - vm.available) / MIB))
    return limits


def tree_rss_mib(procs: list[Any]) -> float:
    import psutil

    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total / MIB
