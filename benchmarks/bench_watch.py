"""What ``oomdoctor watch --config`` costs beside a run: CPU time of the watcher over a fixed wall time.

A stand-in training (a child Python process whose command line names the config, holding 200 MiB, writing
a Trainer progress bar to its log and a ``trainer_log.jsonl`` record every 0.2 s) runs while the watcher
polls it at the default rate (1 s): process finding, the process tree, host limits, the log and jsonl
followers, the warning engine, one JSON frame each: without a GPU (host memory), with a scripted GPU, and
while waiting for a run that has not started (every frame looks through all command lines), and from the
log alone (a stand-in whose command line does not name the config, its log padded past the 256 KiB tail
read each frame for the end of training). The figure is the watcher's CPU time over the wall time, as a share of one core,
next to a baseline measured in the same run (this process idle for the same wall time).

    python benchmarks/bench_watch.py [--seconds 20] [--interval 1]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import yaml

from oomdoctor.commands.watch import watch_run
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import GpuDevice, GpuProcess
from oomdoctor.watch import Watcher

BUDGET_SHARE = 0.01  # 1 % of a core

TRAINING = textwrap.dedent(
    """
    import json, os, sys, time
    hold = bytearray(200 * 1024 * 1024)
    paths = sys.argv[2:] or os.environ["BENCH_WATCH_PATHS"].split(os.pathsep)  # log-only: not on the command line
    log, jsonl = open(paths[0], "a"), open(paths[1], "a")
    log.write("***** Running training *****\\n  Total optimization steps = 100000\\n"); log.flush()
    step = 0
    while True:
        step += 1
        log.write(f"\\r {step}/100000 [00:{step % 60:02d}<10:00,  5.0it/s]"); log.flush()
        jsonl.write(json.dumps({"current_steps": step, "total_steps": 100000, "loss": 1.0,
                                "remaining_time": "0:10:00"}) + "\\n"); jsonl.flush()
        time.sleep(0.2)
    """
)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _config(folder: Path) -> Path:
    config = folder / "train.yaml"
    config.write_text(yaml.safe_dump({
        "model_name_or_path": "Qwen/Qwen3-0.6B", "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "dataset": "d", "eval_dataset": "e", "eval_strategy": "steps", "eval_steps": 500, "max_steps": 100000,
        "per_device_train_batch_size": 1, "cutoff_len": 512, "output_dir": str(folder / "out"),
    }), encoding="utf-8")  # fmt: skip
    (folder / "out").mkdir()
    return config


def bench(label: str, folder: Path, config: Path, gpu: bool, seconds: float, interval: float, *,
          log_only: bool = False) -> float:
    log, jsonl = folder / "train.log", folder / "out" / "trainer_log.jsonl"
    script = folder / "fake_training.py"
    script.write_text(TRAINING, encoding="utf-8")
    if log_only:  # a long log already, and a command line that names neither the config nor the log
        log.write_text("[INFO|2026-12-01 10:00:00] llamafactory.data.loader:143 >> Loading dataset d...\n" * 4000)
        env = {**os.environ, "BENCH_WATCH_PATHS": os.pathsep.join([str(log), str(jsonl)])}
        child = subprocess.Popen([sys.executable, str(script), "-"], env=env)
    else:
        child = subprocess.Popen([sys.executable, str(script), str(config), str(log), str(jsonl)])
    try:
        time.sleep(1.0)  # the stand-in has started and written its first lines
        source = FakeGpuSource.unavailable("benchmark without a GPU")
        if gpu:
            card = GpuDevice(0, "NVIDIA GeForce RTX 4090", 24564.0, used_mib=9000.0,
                             processes=[GpuProcess(child.pid, 8700.0, "python")])  # fmt: skip
            source = FakeGpuSource([card])
        watcher = Watcher(config, log_path=log, gpu_source=source)
        watcher.poll()  # the first frame finds the run; later frames are the steady cost
        stop = threading.Event()
        out = io.StringIO()
        timer = threading.Timer(seconds, stop.set)
        before = _cpu_s()
        timer.start()
        watch_run(watcher, str, interval_s=interval, as_json=True, out=out, stop=stop)
        used = _cpu_s() - before
    finally:
        child.kill()
        child.wait()
    frames = out.getvalue().count("\n")
    last = json.loads(out.getvalue().splitlines()[-1])
    followed = last["log_only"] and not last["pids"] if log_only else last["pids"] == [child.pid]
    assert followed and last["step"], "the watcher did not follow the stand-in training"
    share = used / seconds
    print(f"{label:<34} cpu {used * 1000:7.1f} ms / {seconds:g} s = {100 * share:5.2f}% of a core "
          f"({frames} frames, {1000 * used / max(1, frames):.2f} ms/frame; budget {100 * BUDGET_SHARE:g}%: "
          f"{share / BUDGET_SHARE:.2f} of it)")  # fmt: skip
    return share


def bench_waiting(folder: Path, config: Path, seconds: float, interval: float) -> float:
    """No process names the config yet: every frame looks through all processes' command lines."""
    watcher = Watcher(config, gpu_source=FakeGpuSource.unavailable("benchmark without a GPU"))
    watcher.poll()
    stop, out = threading.Event(), io.StringIO()
    timer = threading.Timer(seconds, stop.set)
    before = _cpu_s()
    timer.start()
    watch_run(watcher, str, interval_s=interval, as_json=True, out=out, stop=stop)
    used = _cpu_s() - before
    frames = out.getvalue().count("\n")
    share = used / seconds
    print(f"{'watch, waiting for the run':<34} cpu {used * 1000:7.1f} ms / {seconds:g} s = {100 * share:5.2f}% of a core "
          f"({frames} frames, {1000 * used / max(1, frames):.2f} ms/frame, {len(list(Path('/proc').glob('[0-9]*')))} processes here)")  # fmt: skip
    return share


def baseline(seconds: float) -> float:
    before = _cpu_s()
    threading.Event().wait(seconds)
    share = (_cpu_s() - before) / seconds
    print(f"{'baseline: this process idle':<34} cpu share {100 * share:5.2f}% of a core")
    return share


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    print(f"pid {os.getpid()}, {args.seconds:g} s per mode, a frame every {args.interval:g} s")
    idle = baseline(args.seconds / 4)
    for label, gpu in (("watch, no GPU (host limits)", False), ("watch, scripted GPU", True)):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            share = bench(label, folder, _config(folder), gpu, args.seconds, args.interval)
            print(f"{'':<34} ratio to the idle baseline: {share / max(idle, 1e-6):.1f}x; "
                  f"under 1 % of a core: {'yes' if share < BUDGET_SHARE else 'NO'}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        share = bench("watch, from the log alone", folder, _config(folder), False, args.seconds, args.interval,
                      log_only=True)  # fmt: skip
        print(f"{'':<34} under 1 % of a core: {'yes' if share < BUDGET_SHARE else 'NO'}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        share = bench_waiting(folder, _config(folder), args.seconds, args.interval)
        print(f"{'':<34} under 1 % of a core: {'yes' if share < BUDGET_SHARE else 'NO'}")


if __name__ == "__main__":
    main()
