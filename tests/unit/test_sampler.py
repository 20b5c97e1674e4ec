"""The sampler: drift-corrected schedule (fake clock), CSV contract, peaks, bounded history, RSS fallback."""

from __future__ import annotations

import csv
import dataclasses
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import GpuDevice
from oomdoctor.trial.sampler import CSV_HEADER, Sampler, SampleSnapshot


class FakeClock:
    """Time that moves only when a query "takes" time or the sampler waits."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SlowSource(FakeGpuSource):
    """A GPU whose queries take scripted durations on the fake clock."""

    def __init__(self, clock: FakeClock, durations: list[float]) -> None:
        super().__init__([GpuDevice(index=0, name="fake", total_mib=1000.0, used_mib=10.0)])
        self.clock = clock
        self.durations = durations

    def sample(self):  # type: ignore[override]
        rows = super().sample()
        self.clock.now += self.durations[min(self.samples_taken - 1, len(self.durations) - 1)]
        return rows


def _run_scripted(
    durations: list[float], samples: int, interval_s: float = 0.2
) -> tuple[Sampler, list[float]]:
    clock = FakeClock()
    source = SlowSource(clock, durations)
    waits: list[float] = []

    def wait(timeout: float) -> bool:
        waits.append(timeout)
        clock.now += timeout
        return source.samples_taken >= samples  # stop once enough samples were taken

    sampler = Sampler(source, interval_s=interval_s, clock=clock, wait=wait)
    sampler.start()
    sampler._thread.join(5)
    sampler.stop()
    return sampler, waits


def test_schedule_does_not_drift_with_query_time() -> None:
    sampler, waits = _run_scripted([0.05], samples=6)
    times = [s.time_s for s in sampler.snapshots()]
    assert times == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert waits[:3] == pytest.approx([0.15, 0.15, 0.15])  # the wait absorbs the query time
    assert sampler.ticks_missed == 0


def test_missed_ticks_are_skipped_not_bunched() -> None:
    # the third query takes 0.5 s: ticks at 0.6 and 0.8 are lost, the next sample is at 1.0
    sampler, waits = _run_scripted([0.05, 0.05, 0.5, 0.05], samples=5)
    times = [s.time_s for s in sampler.snapshots()]
    assert times == pytest.approx([0.0, 0.2, 0.4, 1.0, 1.2])
    assert sampler.ticks_missed == 2
    assert min(waits) >= 0.0


def test_csv_rows_peaks_and_snapshots(tmp_path: Path) -> None:
    devices = [
        GpuDevice(index=0, name="V100", total_mib=32768.0),
        GpuDevice(index=1, name="V100", total_mib=32768.0),
    ]
    frames = [
        [(0, 1000.0, 32768.0, 5.0, 60.0), (1, 900.0, 32768.0, None, None)],
        [(0, 28588.0, 32768.0, 99.0, 250.5), (1, 22230.0, 32768.0, 80.0, 200.0)],
        [(0, 16066.0, 32768.0, 50.0, 150.0), (1, 23000.0, 32768.0, 81.0, 201.0)],
    ]
    seen: list[SampleSnapshot] = []
    path = tmp_path / "gpu-samples.csv"
    sampler = Sampler(FakeGpuSource(devices, frames=frames), csv_path=path, on_sample=seen.append)
    for t in (0.0, 0.2, 0.4):
        sampler.sample_once(t)
    sampler.stop()

    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == CSV_HEADER
    assert ",".join(rows[0]) == "time_s,gpu,memory_used_mib,memory_total_mib,util_pct,power_w"
    assert len(rows) == 1 + 3 * 2  # one row per GPU per sample
    assert rows[1] == ["0.000", "0", "1000.0", "32768.0", "5.0", "60.0"]
    assert rows[2] == ["0.000", "1", "900.0", "32768.0", "", ""]  # unknown util/power stay empty
    assert sampler.peaks_mib == {"0": 28588.0, "1": 23000.0}
    assert sampler.peak_mib == 28588.0
    assert sampler.source_kind == "nvml"
    assert [s.peak_for("0") for s in seen] == [1000.0, 28588.0, 28588.0]
    assert seen[-1].peak_mib == 28588.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].time_s = 9.0  # type: ignore[misc]


def test_history_is_bounded_and_callback_errors_do_not_stop_sampling() -> None:
    def broken(_: SampleSnapshot) -> None:
        raise RuntimeError("the UI fell over")

    source = FakeGpuSource([GpuDevice(index=0, name="x", total_mib=100.0, used_mib=1.0)])
    sampler = Sampler(source, history_len=5, on_sample=broken)
    for i in range(12):
        sampler.sample_once(i * 0.2)
    assert len(sampler.history) == 5
    assert sampler.samples_taken == 12
    assert sampler.callback_errors == 12
    assert [s.time_s for s in sampler.snapshots()] == pytest.approx([1.4, 1.6, 1.8, 2.0, 2.2])


def test_real_thread_stops_promptly() -> None:
    source = FakeGpuSource([GpuDevice(index=0, name="x", total_mib=100.0, used_mib=1.0)])
    sampler = Sampler(source, interval_s=10.0).start()  # would sleep 10 s between samples
    time.sleep(0.05)
    started = time.monotonic()
    sampler.stop()
    assert time.monotonic() - started < 1.0
    assert not sampler._thread.is_alive()
    assert sampler.samples_taken == 1


ALLOCATE_CHILD = """
import sys, time
block = bytearray(200 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1  # touch every page so it is resident
print("ready", flush=True)
time.sleep(30)
"""


def test_without_gpu_the_process_tree_rss_is_recorded(tmp_path: Path) -> None:
    # the launcher is a python whose child allocates 200 MB: the tree's peak must see the child
    parent = "import subprocess, sys; sys.exit(subprocess.call([sys.executable, '-c', sys.argv[1]]))"
    launcher = subprocess.Popen(
        [sys.executable, "-c", parent, ALLOCATE_CHILD],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        assert launcher.stdout.readline().strip() == "ready"
        path = tmp_path / "gpu-samples.csv"
        sampler = Sampler(FakeGpuSource.unavailable(), pid=launcher.pid, interval_s=0.05, csv_path=path)
        with sampler:
            deadline = time.monotonic() + 5
            while sampler.samples_taken < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert sampler.source_kind == "host_rss"
        assert sampler.peak_mib is not None and sampler.peak_mib > 200
        assert sampler.tree is not None and len(sampler.tree.alive()) >= 2  # launcher + its child
        rows = list(csv.DictReader(path.open(newline="")))
        assert rows and {r["gpu"] for r in rows} == {"host"}
        assert all(float(r["memory_used_mib"]) > 200 for r in rows)
        assert float(rows[0]["memory_total_mib"]) > float(rows[0]["memory_used_mib"])  # host RAM
    finally:
        launcher.kill()
        for proc in sampler.tree.alive() if sampler.tree else []:
            proc.kill()
        launcher.wait()


def test_host_ram_when_there_is_nothing_to_follow() -> None:
    sampler = Sampler(FakeGpuSource.unavailable())
    snap = sampler.sample_once(0.0)
    assert snap is not None and snap.source == "host_rss"
    (reading,) = snap.readings
    assert reading.gpu == "host" and 0 < reading.memory_used_mib < reading.memory_total_mib


def test_sampler_thread_is_a_daemon_and_named() -> None:
    sampler = Sampler(FakeGpuSource.unavailable())
    assert sampler._thread.daemon
    assert isinstance(sampler._thread, threading.Thread) and sampler._thread.name == "oomdoctor-sampler"


LATE_TREE = """
import subprocess, sys, time
time.sleep(0.3)
grandchild = "import time; time.sleep(30)"
subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); time.sleep(30)"])
time.sleep(30)
"""


def test_tree_learns_descendants_that_appear_later() -> None:
    from oomdoctor.trial.sampler import ProcessTreeRss

    launcher = subprocess.Popen([sys.executable, "-c", LATE_TREE])
    tree = ProcessTreeRss(launcher.pid)
    try:
        assert [p.pid for p in tree.alive()] == [launcher.pid]
        deadline = time.monotonic() + 10
        while len(tree.alive()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = tree.alive()
        assert len(alive) == 3  # launcher, its child and the grandchild started after the first look
        assert tree.reading().memory_used_mib > 0
    finally:
        for proc in tree.alive():
            proc.kill()
        launcher.wait()
