"""What the trial sampler costs, next to the alternative people use (``nvidia-smi`` in a loop).

Runs the sampler at 5 Hz for 10 s in each mode available here and prints the CPU time it used (this
process, all threads), the samples taken against the schedule, and the ticks it had to skip. Then polls
``nvidia-smi --query-gpu=...`` as a subprocess at the same rate and prints the CPU time of those
processes; without nvidia-smi it spawns ``python -c pass`` instead (a comparable process start) and says so.

    python benchmarks/bench_sampler.py [--seconds 10] [--interval 0.2]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time

from oomdoctor.facts.gpu import FakeGpuSource, NvmlSource
from oomdoctor.facts.types import GpuDevice
from oomdoctor.trial.sampler import Sampler


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_sampler(label: str, make: callable, seconds: float, interval: float) -> None:
    sampler = make()
    before = _cpu_s()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    used = _cpu_s() - before
    expected = int(seconds / interval)
    print(
        f"{label:<44} cpu {used * 1000:8.1f} ms / {seconds:g} s = {100 * used / seconds:5.2f}% of a core; "
        f"{sampler.samples_taken} samples (schedule {expected}), {sampler.ticks_missed} ticks skipped, "
        f"{1000 * used / max(1, sampler.samples_taken):.2f} ms/sample"
    )


def bench_subprocess(label: str, argv: list[str], seconds: float, interval: float) -> None:
    before_self, before_children = _cpu_s(), _children_cpu_s()
    start = time.monotonic()
    polls = 0
    while time.monotonic() - start < seconds:
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        polls += 1
        due = start + polls * interval
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    used = (_cpu_s() - before_self) + (_children_cpu_s() - before_children)
    print(
        f"{label:<44} cpu {used * 1000:8.1f} ms / {seconds:g} s = {100 * used / seconds:5.2f}% of a core; "
        f"{polls} polls, {1000 * used / max(1, polls):.2f} ms/poll"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {1 / args.interval:g} Hz for {args.seconds:g} s"
    )

    nvml = NvmlSource()
    if nvml.available():
        bench_sampler("sampler, NVML (all visible GPUs)", lambda: Sampler(nvml, interval_s=args.interval),
                      args.seconds, args.interval)  # fmt: skip
    else:
        print(f"NVML: not available here ({nvml.reason()})")
    # a process tree like a trial's: this process and a sleeping child
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    try:
        bench_sampler(
            "sampler, process-tree RSS (no GPU path)",
            lambda: Sampler(FakeGpuSource.unavailable(), pid=os.getpid(), interval_s=args.interval),
            args.seconds,
            args.interval,
        )
    finally:
        child.kill()
        child.wait()
    fake = FakeGpuSource([GpuDevice(index=i, name="fake", total_mib=32768.0, used_mib=1.0) for i in range(8)])
    bench_sampler("sampler alone, 8 scripted GPUs (no NVML cost)", lambda: Sampler(fake, interval_s=args.interval),
                  args.seconds, args.interval)  # fmt: skip

    smi = shutil.which("nvidia-smi")
    if smi:
        query = [
            smi,
            "--query-gpu=memory.used,memory.total,utilization.gpu,power.draw",
            "--format=csv,noheader",
        ]
        bench_subprocess("nvidia-smi --query-gpu as a subprocess", query, args.seconds, args.interval)
    else:
        print(
            "nvidia-smi: not installed here; timing `python -c pass` spawns instead (a comparable process start)"
        )
        bench_subprocess(
            "python -c pass as a subprocess", [sys.executable, "-c", "pass"], args.seconds, args.interval
        )


if __name__ == "__main__":
    main()
