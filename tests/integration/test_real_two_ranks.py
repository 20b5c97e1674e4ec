"""A real out-of-memory of a two-rank run: LLaMA-Factory launched by torchrun with two CPU ranks (gloo,
``FORCE_TORCHRUN=1 NPROC_PER_NODE=2``) under an address-space cap (``prlimit --as``, inherited by every rank),
then diagnosed from the interleaved log: the first rank that ran out, its phase, the cause, and what became of
the other rank.

Each rank gets batches of 8 samples longer than cutoff_len 2048 on the tiny Qwen3 with a 16k vocabulary: the
first forward's logits alone are 8 x 2048 x 16384 x 4 B = 1 GiB per rank. The cap is what the same two-rank
command needs up to "Running training" (measured here) plus 1.5 GiB: loading passes, the first batch cannot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures.address_space import load_address_space_mib
from fixtures.commands import oomdoctor
from fixtures.tiny_qwen3 import build_tiny_qwen3, tiny_train_config, write_tiny_dataset

pytestmark = pytest.mark.integration

VOCAB = 16384
BATCH = 8
CUTOFF = 2048
SLACK_MIB = 1536


def test_two_cpu_ranks_run_out_and_the_log_is_read_per_rank(llamafactory_cli: Path, tmp_path: Path) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    model = build_tiny_qwen3(tmp_path / "model", vocab_size=VOCAB)
    data = write_tiny_dataset(tmp_path / "data", n=2 * BATCH, n_val=2, words_per_sample=(1500, 2500))
    config = tiny_train_config(model, data, tmp_path / "saves", steps=1, batch=BATCH, cutoff_len=CUTOFF,
                               evaluate=False)  # fmt: skip
    config_path = tmp_path / "two_ranks.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "FORCE_TORCHRUN": "1",
        "NPROC_PER_NODE": "2",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # torchrun
    }
    command = [str(llamafactory_cli), "train", str(config_path)]
    cap_mib = load_address_space_mib(command, env) + SLACK_MIB

    run = subprocess.run([prlimit, f"--as={cap_mib * 2**20}", *command], env=env, capture_output=True,
                         text=True, timeout=400)  # fmt: skip
    log_path = tmp_path / "train.log"
    log_path.write_text(run.stdout + run.stderr, encoding="utf-8")
    log = log_path.read_text(encoding="utf-8")
    assert run.returncode != 0, log[-3000:]
    assert "world size: 2" in log and "***** Running training *****" in log, log[-3000:]
    assert "can't allocate memory" in log and "ChildFailedError" in log

    diagnosed = oomdoctor("diagnose", "--config", str(config_path), "--log", str(log_path), "--json")
    assert diagnosed.returncode == 1, diagnosed.stderr
    d = json.loads(diagnosed.stdout)
    assert d["oom"] is True and d["phase"] == "first_batch" and d["cause"] == "logits"
    findings = {f["id"]: f["text"]["en"] for f in d["findings"]}
    first = findings["ranks_first"]
    assert first.startswith(("rank0 ", "rank1 ")), findings
    other = "rank1" if first.startswith("rank0") else "rank0"
    # the other rank ran out too (both batches are as long) or was torn down by torchrun after the first
    assert other in findings.get("ranks_same_cause", "") + findings.get("ranks_torn_down", ""), findings
    assert d["proposal"]["rule"] == "first_batch.halve_micro_batch"
    assert d["proposal"]["changes"]["per_device_train_batch_size"] == [BATCH, BATCH // 2]
