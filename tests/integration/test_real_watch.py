"""``oomdoctor watch --json`` beside a real ``llamafactory-cli train`` under an address-space cap.

The tiny Qwen3 (16k vocabulary) trains with batch 1 at up to 1024 tokens and validates at step 5 with an eval
batch of 32: the validation's logits alone are 32 x 1024 x 16384 x 4 B = 2 GiB, while the cap leaves about
1 GiB above what loading needs. The watcher must warn about that validation, naming step 5, before the
run's out-of-memory line appears; we measure how long before (seconds and steps). The same run with an eval
batch of 1 survives, and the watcher must stay silent through it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixtures.address_space import load_address_space_mib
from fixtures.tiny_qwen3 import build_tiny_qwen3, tiny_train_config, write_tiny_dataset

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

VOCAB = 16384
CUTOFF = 1024
STEPS = 8
EVAL_STEP = 5
SLACK_MIB = 1024  # above the loading peak: training steps fit, a 32-sample validation does not
OOM_MARKERS = ("can't allocate memory", "out of memory", "MemoryError")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, llamafactory_cli: Path) -> dict[str, Any]:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    root = tmp_path_factory.mktemp("watch")
    model = build_tiny_qwen3(root / "model", vocab_size=VOCAB)
    data = write_tiny_dataset(root / "data", n=16, n_val=32, words_per_sample=(700, 900))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(root / "hf")}
    probe = root / "probe.yaml"
    probe.write_text(yaml.safe_dump(_config(model, data, root / "probe-out", 1)), encoding="utf-8")
    cap_mib = load_address_space_mib([str(llamafactory_cli), "train", str(probe)], env) + SLACK_MIB
    return {"root": root, "model": model, "data": data, "env": env, "cap_mib": cap_mib, "prlimit": prlimit,
            "cli": llamafactory_cli}  # fmt: skip


def _config(model: Path, data: Path, out: Path, eval_batch: int) -> dict[str, Any]:
    config = tiny_train_config(model, data, out, steps=STEPS, batch=1, cutoff_len=CUTOFF)
    config.update(
        per_device_eval_batch_size=eval_batch, eval_steps=EVAL_STEP, save_steps=STEPS
    )  # a save at the end
    return config


def _watch_beside(run: dict[str, Any], name: str, eval_batch: int) -> dict[str, Any]:
    """Start the training under the cap, then the watcher beside it; collect frames and the OOM line's time."""
    folder = run["root"] / name
    folder.mkdir()
    config_path = folder / "train.yaml"
    config_path.write_text(yaml.safe_dump(_config(run["model"], run["data"], folder / "saves", eval_batch)),
                           encoding="utf-8")  # fmt: skip
    log_path = folder / "train.log"
    with open(log_path, "wb") as log:
        train = subprocess.Popen([run["prlimit"], f"--as={run['cap_mib'] * 2**20}", str(run["cli"]), "train",
                                  str(config_path)], stdout=log, stderr=subprocess.STDOUT, env=run["env"],
                                 start_new_session=True)  # fmt: skip
    watch = subprocess.Popen(
        [sys.executable, "-m", "oomdoctor.cli", "--lang", "en", "watch", "--config", str(config_path),
         "--log", str(log_path), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    oom_at: list[float] = []
    done = threading.Event()

    def look_for_oom() -> None:
        while not done.is_set() and not oom_at:
            text = log_path.read_text(encoding="utf-8", errors="replace")
            if any(marker in text for marker in OOM_MARKERS):
                oom_at.append(time.time())
            time.sleep(0.05)

    looker = threading.Thread(target=look_for_oom, daemon=True)
    looker.start()
    try:
        out, err = watch.communicate(timeout=480)  # a loaded CI machine runs it several times slower
        train.wait(timeout=60)
    finally:
        done.set()
        for proc in (watch, train):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL) if proc is train else proc.kill()
                proc.wait()
    looker.join(timeout=5)
    frames = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {"frames": frames, "watch_rc": watch.returncode, "watch_err": err, "train_rc": train.returncode,
            "log": log_path.read_text(encoding="utf-8", errors="replace"), "oom_at": oom_at[0] if oom_at else None}  # fmt: skip


def test_warns_about_the_validation_before_it_runs_out(tiny_run: dict[str, Any]) -> None:
    seen = _watch_beside(tiny_run, "oom", eval_batch=32)
    frames, log = seen["frames"], seen["log"]
    assert seen["train_rc"] != 0 and seen["oom_at"] is not None, log[-3000:]
    assert "***** Running Evaluation *****" in log, (
        f"cap {tiny_run['cap_mib']} MiB: it did not reach the validation"
    )
    assert frames, seen["watch_err"]

    warned = [(f, w) for f in frames for w in f["warnings"] if w["kind"] == "eval_needs_more"]
    assert warned, [f["warnings"] for f in frames]
    frame, first = warned[0]
    assert first["expected_step"] == EVAL_STEP
    # the engine warns once the need passes needed_over_left x what is left (rules/live/warnings.yaml): what is
    # left when the warning is made depends on how far loading had got at that frame
    threshold = yaml.safe_load((ROOT / "rules" / "live" / "warnings.yaml").read_text(encoding="utf-8"))
    factor = threshold["kinds"]["eval_needs_more"]["needed_over_left"]
    assert first["needed_mib"] > factor * first["left_mib"] > 0
    assert first["rule"] is not None and first["rule"].startswith("eval.")
    assert "per_device_eval_batch_size" in first["changes"]
    assert f"step {EVAL_STEP}" in first["text"]["en"] and f"第 {EVAL_STEP} 步" in first["text"]["zh"]

    lead_s = seen["oom_at"] - frame["unix_time"]
    lead_steps = EVAL_STEP - (first["step_seen"] or 0)
    print(f"\nwatch lead time: warned {lead_s:.1f} s and {lead_steps} steps before the out-of-memory line "
          f"(warning at step {first['step_seen']}, {first['time_s']:.1f} s after the watcher started)")  # fmt: skip
    assert lead_s > 0 and lead_steps >= 1

    last = frames[-1]
    assert last["ended"] is True and seen["watch_rc"] == 1
    assert last["diagnosis"]["oom"] is True and last["diagnosis"]["phase"] == "eval"
    assert last["history"][0]["kind"] == "eval_needs_more"


def test_a_run_that_fits_raises_no_warning(tiny_run: dict[str, Any]) -> None:
    seen = _watch_beside(tiny_run, "fits", eval_batch=1)
    frames = seen["frames"]
    assert seen["train_rc"] == 0, seen["log"][-3000:]
    assert any(f["step"] == STEPS for f in frames), [f["step"] for f in frames]
    assert any(f["alive"] and f["pools"][-1]["limit_source"] == "rlimit_as" for f in frames)
    assert [w for f in frames for w in f["warnings"]] == []  # no false warning, the checkpoint save included
    before_save = [f for f in frames if f["alive"] and f["next_save_step"] == STEPS]
    assert before_save and all("save" in f["pools"][-1]["phase_lines_mib"] for f in before_save)
    assert "Saving model checkpoint to" in seen["log"]
    assert frames[-1]["ended"] is True and frames[-1]["history"] == []
    assert frames[-1]["diagnosis"]["oom"] is False and seen["watch_rc"] == 0
