"""``oomdoctor fit`` against transformers' ``auto_find_batch_size`` on the same tiny model, data and memory cap.

On this CPU machine the "card" is an address-space cap (``prlimit --as``): the address space a LLaMA-Factory run
of the tiny Qwen3 (vocabulary 16k) needs up to "Running training", plus a slack that the short batches fit in
and the batch of the four longest rows (which come last in the file, shuffling off) does not. The user's
config asks for micro-batch 4, accumulation 2 (effective batch 8), one epoch.

- transformers: ``auto_find_batch_size: true`` trains until the long rows run out of memory near the end of
  the epoch, halves the micro-batch (accumulation unchanged: the effective batch halves) and starts the
  epoch again.
- oomdoctor: ``fit --gpu-mib <resident budget>`` (the cap above loading, in resident terms: the load RSS measured
  in the same run + the slack), at most two probes, then the winner's full epoch under the same cap.

Prints both side by side: tries, wall seconds, effective batch kept or not, whether the found batch survived
the full epoch. Wall times are of this run on this machine (ratios between the two columns are what carries).

    python benchmarks/bench_fit.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

VOCAB = 16384
SLACK_MIB = 700
BATCH, ACCUMULATION = 4, 2


def build(root: Path) -> tuple[Path, dict[str, Any]]:
    """The tiny model, a dataset whose four long rows come last, and the user's config (one epoch)."""
    import yaml

    from fixtures.tiny_qwen3 import build_tiny_qwen3, tiny_train_config, write_tiny_dataset

    model = build_tiny_qwen3(root / "model", vocab_size=VOCAB)
    data = write_tiny_dataset(root / "data", n=40, n_val=4, words_per_sample=(8, 30))
    long = write_tiny_dataset(root / "long", n=4, n_val=0, words_per_sample=(700, 900), seed=1)
    rows = json.loads((data / "tiny_train.json").read_text()) + json.loads(
        (long / "tiny_train.json").read_text()
    )
    (data / "tiny_train.json").write_text(json.dumps(rows), encoding="utf-8")
    config = tiny_train_config(model, data, root / "saves", steps=100, batch=BATCH, cutoff_len=2048)
    config.pop("max_steps")
    config.update({"disable_shuffling": True, "gradient_accumulation_steps": ACCUMULATION,
                   "per_device_eval_batch_size": BATCH, "save_steps": 1000, "eval_steps": 1000})  # fmt: skip
    path = root / "train.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path, config


def load_footprint(command: list[str], env: dict[str, str]) -> tuple[int, int]:
    """(peak virtual size, resident size) in MiB of the command's processes when training starts; then stop it."""
    import psutil

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)  # fmt: skip
    started = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if b"***** Running training *****" in line:
                started.set()

    threading.Thread(target=read, daemon=True).start()
    vms = rss = 0
    deadline = time.monotonic() + 300
    try:
        while not started.is_set() and proc.poll() is None and time.monotonic() < deadline:
            try:
                root = psutil.Process(proc.pid)
                members = [root, *root.children(recursive=True)]
                vms = max([vms] + [p.memory_info().vms for p in members])
                rss = max(rss, sum(p.memory_info().rss for p in members))
            except psutil.Error:
                pass
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if not started.is_set():
        raise SystemExit("bench_fit: the measuring run did not reach training")
    return vms // 2**20, rss // 2**20


def run_hf(
    root: Path, config: dict[str, Any], cli: Path, cap: list[str], env: dict[str, str]
) -> dict[str, Any]:
    import yaml

    path = root / "hf.yaml"
    path.write_text(yaml.safe_dump({**config, "auto_find_batch_size": True, "output_dir": str(root / "hf-out")},
                                   sort_keys=False), encoding="utf-8")  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        [*cap, str(cli), "train", str(path)], capture_output=True, text=True, env=env, cwd=root
    )
    wall = time.monotonic() - started
    text = done.stdout + done.stderr
    (root / "hf.log").write_text(text, encoding="utf-8")
    # each retry starts training again; the Trainer logs the batch it settled on and the total batch
    tries = text.count("***** Running training *****")
    per_device = [int(m) for m in re.findall(r"Instantaneous batch size per device = (\d+)", text)]
    adjusted = [int(m) for m in re.findall(r"batch size has been adjusted to: (\d+)", text)]
    totals = [
        int(m)
        for m in re.findall(
            r"Total train batch size \(w\. parallel, distributed & accumulation\) = (\d+)", text
        )
    ]
    final = adjusted[-1] if adjusted and tries > 1 else (per_device[-1] if per_device else BATCH)
    effective = totals[-1] if totals else final * ACCUMULATION
    return {"tries": tries, "wall_s": wall, "micro_batch": final, "accumulation": ACCUMULATION,
            "effective_batch": effective, "kept": effective == BATCH * ACCUMULATION,
            "epoch_ok": done.returncode == 0 and "***** train metrics *****" in text, "exit": done.returncode}  # fmt: skip


def run_fit(root: Path, user: Path, budget_mib: int, launcher: str, cli: Path, cap: list[str],
            env: dict[str, str]) -> dict[str, Any]:  # fmt: skip
    """A probe at micro-batch 1 calibrates this setting (a fresh machine has no calibration), then fit, then the
    winner's full epoch; the calibration probe counts as a try."""
    import yaml

    started = time.monotonic()
    small = root / "calibrate.yaml"
    raw = yaml.safe_load(user.read_text(encoding="utf-8"))
    small.write_text(yaml.safe_dump({**raw, "per_device_train_batch_size": 1,
                                     "gradient_accumulation_steps": BATCH * ACCUMULATION}), encoding="utf-8")  # fmt: skip
    oom_env = {**env, "PYTHONPATH": str(REPO / "src")}
    probe = subprocess.run([sys.executable, "-m", "oomdoctor.cli", "--lang", "en", "trial", "--config", str(small),
                            "--probe", "--out", str(root / "calibration-probe"), "--launcher", launcher],
                           capture_output=True, text=True, cwd=root, env=oom_env)  # fmt: skip
    if probe.returncode != 0:
        print(probe.stdout[-2000:], probe.stderr[-2000:], file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "oomdoctor.cli", "--lang", "en", "fit", "--config", str(user),
                           "--out", str(root / "fit"), "--gpu-mib", str(budget_mib), "--margin", "0.05",
                           "--launcher", launcher, "--json"], capture_output=True, text=True, cwd=root,
                          env=oom_env)  # fmt: skip
    fit_wall = time.monotonic() - started
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        return {"tries": 1, "wall_s": fit_wall, "epoch_ok": False, "exit": done.returncode}
    result = json.loads(done.stdout)
    winner = result["winner"]
    epoch_start = time.monotonic()
    epoch = subprocess.run([*cap, str(cli), "train", str(root / "fit" / "config.yaml")], capture_output=True,
                           text=True, env=env, cwd=root)  # fmt: skip
    epoch_wall = time.monotonic() - epoch_start
    text = epoch.stdout + epoch.stderr
    (root / "fit-epoch.log").write_text(text, encoding="utf-8")
    return {"tries": 1 + result["probes"], "wall_s": fit_wall + epoch_wall, "fit_probes": result["probes"], "fit_wall_s": fit_wall,
            "micro_batch": winner["micro_batch"], "accumulation": winner["accumulation"],
            "effective_batch": result["effective_batch_after"], "kept": result["effective_batch_kept"],
            "epoch_ok": epoch.returncode == 0 and "***** train metrics *****" in text, "exit": epoch.returncode,
            "calibrated_by": result["calibrated_by"]}  # fmt: skip


def table(hf: dict[str, Any], fit: dict[str, Any]) -> str:
    def cell(row: dict[str, Any], key: str) -> str:
        value = row.get(key)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.1f}"
        return "-" if value is None else str(value)

    rows = [("tries (runs or probes before the epoch)", "tries"), ("wall seconds, to a finished epoch", "wall_s"),
            ("micro-batch found", "micro_batch"), ("gradient accumulation", "accumulation"),
            ("effective batch (was 8)", "effective_batch"), ("effective batch kept", "kept"),
            ("found batch survived the full epoch", "epoch_ok")]  # fmt: skip
    width = max(len(label) for label, _ in rows)
    lines = [f"{'':{width}}  {'auto_find_batch_size':>20}  {'oomdoctor fit':>14}"]
    lines += [f"{label:{width}}  {cell(hf, key):>20}  {cell(fit, key):>14}" for label, key in rows]
    if hf.get("wall_s") and fit.get("wall_s"):
        lines.append(
            f"{'wall, fit / auto_find_batch_size':{width}}  {'':>20}  {fit['wall_s'] / hf['wall_s']:>14.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="keep the work folder here (default: a temporary one, removed)")
    args = parser.parse_args()
    prlimit = shutil.which("prlimit")
    cli = Path(sys.executable).parent / "llamafactory-cli"
    if prlimit is None or not cli.is_file():
        print("bench_fit: needs prlimit and llamafactory-cli beside this Python", file=sys.stderr)
        return 2
    root = Path(args.keep).absolute() if args.keep else Path(tempfile.mkdtemp(prefix="bench-fit-"))
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(root / "hf"),
           "XDG_CACHE_HOME": str(root / "cache")}  # fmt: skip
    try:
        user, config = build(root)
        measure = root / "measure.yaml"
        measure.write_text(json.dumps({**config, "output_dir": str(root / "measure-out")}), encoding="utf-8")
        vms, rss = load_footprint([str(cli), "train", str(measure)], env)
        cap = [prlimit, f"--as={(vms + SLACK_MIB) * 2**20}"]
        launcher = (f"HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME={shlex.quote(str(root / 'hf'))} "
                    f"{shlex.join(cap)} {shlex.quote(str(cli))} train")  # fmt: skip
        print(
            f"cap: address space {vms + SLACK_MIB:,} MiB (load {vms:,} + {SLACK_MIB}); "
            f"resident budget for fit {rss + SLACK_MIB:,} MiB (load RSS {rss:,} + {SLACK_MIB})"
        )
        hf = run_hf(root, config, cli, cap, env)
        fit = run_fit(root, user, rss + SLACK_MIB, launcher, cli, cap, env)
        print(table(hf, fit))
        print(json.dumps({"auto_find_batch_size": hf, "oomdoctor_fit": fit}, default=str))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
