"""A real out-of-memory in the first batch, caused on the CPU with an address-space cap (``prlimit --as``),
recorded by ``oomdoctor trial`` and then diagnosed from the trial's own files.

The model is the tiny Qwen3 with a 16k vocabulary, fed batches of 32 samples longer than cutoff_len 2048:
the first forward needs 32 x 2048 x 16384 x 4 B = 4 GiB for the logits alone. The cap is the address space
the same command needs up to "Running training" (measured here, on this machine) plus 1.5 GiB, so loading
passes and the first batch cannot.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from fixtures.address_space import load_address_space_mib
from fixtures.commands import offline_env, oomdoctor
from fixtures.tiny_qwen3 import build_tiny_qwen3, tiny_train_config, write_tiny_dataset

pytestmark = pytest.mark.integration

VOCAB = 16384
BATCH = 32
CUTOFF = 2048
SLACK_MIB = 1536  # above the loading peak; the first batch needs more than twice that


def test_first_batch_oom_is_recorded_and_diagnosed(llamafactory_cli: Path, tmp_path: Path) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    model = build_tiny_qwen3(tmp_path / "model", vocab_size=VOCAB)
    data = write_tiny_dataset(tmp_path / "data", n=BATCH, n_val=4, words_per_sample=(1500, 2500))
    config = tiny_train_config(model, data, tmp_path / "saves", steps=4, batch=BATCH, cutoff_len=CUTOFF,
                               evaluate=False)  # fmt: skip
    config_path = tmp_path / "oom.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    probe = tmp_path / "probe.yaml"
    probe.write_text(yaml.safe_dump({**config, "output_dir": str(tmp_path / "probe-out")}), encoding="utf-8")
    cap_mib = load_address_space_mib([str(llamafactory_cli), "train", str(probe)], env) + SLACK_MIB

    out = tmp_path / "trial"
    launcher = f"{offline_env(tmp_path / 'hf')} {prlimit} --as={cap_mib * 2**20} {shlex.quote(str(llamafactory_cli))} train"
    done = oomdoctor("trial", "--config", str(config_path), "--steps", "1", "--out", str(out),
                     "--launcher", launcher, "--timeout", "300")  # fmt: skip
    log = (out / "train.log").read_text(encoding="utf-8")
    assert done.returncode == 1, f"cap {cap_mib} MiB\n{done.stdout}{done.stderr}\n{log[-3000:]}"
    assert "***** Running training *****" in log, f"failed while loading under a {cap_mib} MiB cap"
    assert "can't allocate memory" in log

    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["oom"] is True and result["outcome"] == "oom" and result["ok"] is False
    assert result["exit_code"] not in (0, None) and result["timed_out"] is False
    assert result["phase"] == "first_batch"
    assert result["oom_kind"] == "cpu_alloc"
    assert result["requested_mib"] == pytest.approx(BATCH * CUTOFF * VOCAB * 4 / 2**20)
    assert result["steps_done"] == 0 and result["checkpoints"] == []
    assert result["env_overrides"]["HF_HUB_OFFLINE"] == "1"
    assert result["argv"][:2] == [prlimit, f"--as={cap_mib * 2**20}"]
    assert "Trial ran out of memory." in done.stdout

    diagnosed = oomdoctor(
        "diagnose", "--config", str(out / "config.yaml"), "--log", str(out / "train.log"), "--json"
    )
    assert diagnosed.returncode in (0, 1), diagnosed.stderr
    diagnosis = json.loads(diagnosed.stdout)
    assert diagnosis["oom"] is True and diagnosis["phase"] == "first_batch"
    proposal = diagnosis["proposal"]
    assert proposal is not None, diagnosis
    assert proposal["rule"] == "first_batch.halve_micro_batch", (proposal["rule"], diagnosis["cause"])
    assert proposal["changes"]["per_device_train_batch_size"] == [BATCH, BATCH // 2]
    assert proposal["changes"]["gradient_accumulation_steps"] == [1, 2]
