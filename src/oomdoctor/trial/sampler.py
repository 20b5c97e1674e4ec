"""Memory samples of a running trial: every visible GPU through NVML, or the trial's process tree RSS.

The course measures "the highest reading, sampled every 200 ms over the whole command"; this is that
sampler. It runs in its own thread on a drift-corrected schedule (tick k is at ``start + k * interval``; a
tick missed because a query was slow is skipped, never bunched), appends one CSV row per GPU per sample,
keeps a bounded history and hands each sample to a callback as an immutable snapshot.

Without an NVIDIA driver the one row per sample has gpu ``host``: the summed RSS of the launcher and all
its descendants, against the host's RAM. That is what runs out on a CPU machine (and what a bare
``Killed`` means on a GPU one).
"""

from __future__ import annotations

import contextlib
import csv
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from oomdoctor.facts.gpu import MIB, GpuSource

CSV_HEADER = ("time_s", "gpu", "memory_used_mib", "memory_total_mib", "util_pct", "power_w")
HOST = "host"


@dataclass(frozen=True)
class GpuReading:
    """One device at one instant. ``gpu`` is the CUDA index as text ("0", "1") or "host"."""

    gpu: str
    memory_used_mib: float
    memory_total_mib: float
    util_pct: float | None = None
    power_w: float | None = None


@dataclass(frozen=True)
class SampleSnapshot:
    """What the UI gets each tick. Immutable, so it can cross threads and be coalesced freely."""

    time_s: float  # seconds since the sampler started
    readings: tuple[GpuReading, ...]
    peaks_mib: tuple[tuple[str, float], ...]  # highest reading so far, per gpu
    source: str  # "nvml" or "host_rss"

    @property
    def peak_mib(self) -> float | None:
        return max((mib for _, mib in self.peaks_mib), default=None)

    def peak_for(self, gpu: str) -> float | None:
        return dict(self.peaks_mib).get(gpu)


class ProcessTreeRss:
    """The summed RSS of a process and every descendant it has had (a child that outlives its parent still
    counts). Also the runner's list of processes to stop: see ``alive()``."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._psutil = psutil
        self.root_pid = pid
        self._known: dict[int, Any] = {}
        with contextlib.suppress(psutil.Error):
            self._known[pid] = psutil.Process(pid)
        self._seen_pids: set[int] = set()  # the first look reads every process's parent
        self._cpu_count = psutil.cpu_count() or 1
        self.host_total_mib = psutil.virtual_memory().total / MIB

    def _refresh(self) -> None:
        """Learn new descendants. Only processes that appeared since the last look can have joined the tree
        (a parent link never moves into it), so only their parents are read: one cheap pid listing a tick
        instead of a pass over every process's /proc entry."""
        psutil = self._psutil
        pids = set(psutil.pids())
        new = pids - self._seen_pids
        self._seen_pids = pids
        parents: dict[int, int] = {}
        for pid in new:
            with contextlib.suppress(psutil.Error):
                parents[pid] = psutil.Process(pid).ppid()
        joined = True
        while joined:  # a new child of a new child joins on a later round
            joined = False
            for pid, ppid in list(parents.items()):
                if ppid in self._known and pid not in self._known:
                    with contextlib.suppress(psutil.Error):
                        self._known[pid] = psutil.Process(pid)
                        joined = True
                    parents.pop(pid)

    def alive(self) -> list[Any]:
        """Processes of the tree still running (pid reuse is caught by psutil's create-time check)."""
        self._refresh()
        living = []
        for pid, proc in list(self._known.items()):
            try:
                if proc.is_running() and proc.status() != self._psutil.STATUS_ZOMBIE:
                    living.append(proc)
                    continue
            except self._psutil.Error:
                pass
            self._known.pop(pid, None)
        return living

    def reading(self) -> GpuReading:
        rss = 0
        cpu_pct = 0.0
        for proc in self.alive():
            try:
                rss += proc.memory_info().rss
                cpu_pct += proc.cpu_percent(None)
            except self._psutil.Error:
                continue
        return GpuReading(HOST, rss / MIB, self.host_total_mib, min(100.0, cpu_pct / self._cpu_count), None)


class HostRam:
    """The whole host's used RAM, for when there is no GPU and no process to follow (``watch``)."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil

    def reading(self) -> GpuReading:
        vm = self._psutil.virtual_memory()
        return GpuReading(
            HOST, (vm.total - vm.available) / MIB, vm.total / MIB, self._psutil.cpu_percent(None), None
        )


class Sampler:
    """Samples in a background thread until ``stop()``. Use as a context manager or start()/stop().

    ``source`` is read when it has GPUs; otherwise the process tree of ``pid`` (or the host RAM when ``pid``
    is None) is recorded. ``clock`` and ``wait`` are injectable so tests can drive the schedule.
    """

    def __init__(
        self,
        source: GpuSource | None = None,
        *,
        pid: int | None = None,
        interval_s: float = 0.2,
        csv_path: str | Path | None = None,
        on_sample: Callable[[SampleSnapshot], None] | None = None,
        history_len: int = 3000,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self._clock = clock
        self._stop_event = threading.Event()
        self._wait = wait if wait is not None else self._stop_event.wait
        self._on_sample = on_sample
        self.history: deque[SampleSnapshot] = deque(maxlen=history_len)
        self._peaks: dict[str, float] = {}
        self._lock = threading.Lock()
        self.ticks_missed = 0
        self.samples_taken = 0
        self.callback_errors = 0
        self.tree: ProcessTreeRss | None = None
        self._gpu = source if source is not None and source.available() else None
        self._host: ProcessTreeRss | HostRam | None = None
        if self._gpu is None:
            self.tree = ProcessTreeRss(pid) if pid is not None else None
            self._host = self.tree if self.tree is not None else HostRam()
        self.source_kind = "nvml" if self._gpu is not None else "host_rss"
        self._csv_file: TextIO | None = None
        self._csv: Any = None
        if csv_path is not None:
            self._csv_file = open(csv_path, "w", newline="", encoding="utf-8")  # noqa: SIM115 - closed in stop()
            self._csv = csv.writer(self._csv_file)
            self._csv.writerow(CSV_HEADER)
            self._csv_file.flush()
        self._thread = threading.Thread(target=self._run, name="oomdoctor-sampler", daemon=True)
        self._start_time: float | None = None

    # Life cycle ----------------------------------------------------------------------------------------------
    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop_event.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        with self._lock:
            if self._csv_file is not None:
                self._csv_file.close()
                self._csv_file = None

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Results ------------------------------------------------------------------------------------------------
    @property
    def peaks_mib(self) -> dict[str, float]:
        with self._lock:
            return dict(self._peaks)

    @property
    def peak_mib(self) -> float | None:
        with self._lock:
            return max(self._peaks.values(), default=None)

    def snapshots(self) -> Iterator[SampleSnapshot]:
        return iter(tuple(self.history))

    # The loop -----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        start = self._clock()
        self._start_time = start
        tick = 0
        while not self._stop_event.is_set():
            self.sample_once(self._clock() - start)
            tick += 1
            now = self._clock()
            due = start + tick * self.interval_s
            if now > due:  # a slow query: skip the ticks it covered instead of firing them back to back
                skipped = math.floor((now - due) / self.interval_s) + 1
                self.ticks_missed += skipped
                tick += skipped
                due = start + tick * self.interval_s
            if self._wait(max(0.0, due - now)):
                break

    def read(self) -> tuple[GpuReading, ...]:
        """One reading of every device, without recording it."""
        if self._gpu is not None:
            return tuple(
                GpuReading(str(index), used, total, util, power)
                for index, used, total, util, power in self._gpu.sample()
            )
        assert self._host is not None
        return (self._host.reading(),)

    def sample_once(self, time_s: float) -> SampleSnapshot | None:
        """Take, record and publish one sample; also usable without the thread (tests, ``--once``)."""
        try:
            readings = self.read()
        except Exception:  # a source must fail soft; if one does not, lose this tick, not the trial
            return None
        with self._lock:
            for r in readings:
                if r.memory_used_mib > self._peaks.get(r.gpu, float("-inf")):
                    self._peaks[r.gpu] = r.memory_used_mib
            snapshot = SampleSnapshot(
                time_s=time_s,
                readings=readings,
                peaks_mib=tuple(sorted(self._peaks.items())),
                source=self.source_kind,
            )
            self.history.append(snapshot)
            self.samples_taken += 1
            if self._csv is not None and self._csv_file is not None:
                for r in readings:
                    self._csv.writerow(
                        (
                            f"{time_s:.3f}",
                            r.gpu,
                            f"{r.memory_used_mib:.1f}",
                            f"{r.memory_total_mib:.1f}",
                            "" if r.util_pct is None else f"{r.util_pct:.1f}",
                            "" if r.power_w is None else f"{r.power_w:.1f}",
                        )
                    )
                self._csv_file.flush()
        if self._on_sample is not None:
            try:
                self._on_sample(snapshot)
            except Exception:  # the UI's problem must not stop the recording
                self.callback_errors += 1
        return snapshot
