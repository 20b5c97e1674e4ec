"""A patched config really trains: the printed command, run from another folder, finds the user's relative
model and dataset paths, writes into the fresh output_dir, and LLaMA-Factory sees the changed batch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oomdoctor.diagnosis import Proposal
from oomdoctor.patch import write_patched_config

pytestmark = pytest.mark.integration


def test_patched_tiny_config_trains_from_the_printed_command(tiny_qwen3_dir, tiny_dataset_dir, tmp_path):
    pytest.importorskip("llamafactory")
    from fixtures.tiny_qwen3 import tiny_train_config

    project = tmp_path / "project"  # the user's LLaMA-Factory folder
    shutil.copytree(tiny_qwen3_dir, project / "models" / "tiny")
    shutil.copytree(tiny_dataset_dir, project / "data")
    (project / "configs").mkdir()
    raw = tiny_train_config("models/tiny", "data", "saves/tiny", steps=2, batch=2, evaluate=False)
    config = project / "configs" / "tiny.yaml"
    config.write_text(
        "# 课程风格的注释\n" + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )

    text = {"en": "x", "zh": "x"}
    proposal = Proposal(
        rule="first_batch.halve_micro_batch",
        title=text,
        changes={"per_device_train_batch_size": [2, 1], "gradient_accumulation_steps": [1, 2]},
        why=text,
        cost=text,
        judge=text,
        cause="activations",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cwd = Path.cwd()
    os.chdir(elsewhere)
    try:
        result = write_patched_config(config, proposal, tmp_path / "trials" / "t1")
    finally:
        os.chdir(cwd)
    assert result.run_dir == project and result.command.startswith("cd ")

    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update({"CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "DISABLE_VERSION_CHECK": "1"})
    proc = subprocess.run(
        result.command, shell=True, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Instantaneous batch size per device = 1" in log
    assert "Gradient Accumulation steps = 2" in log
    output = result.folder / "output"
    lines = [
        json.loads(line) for line in (output / "trainer_log.jsonl").read_text().splitlines() if line.strip()
    ]
    assert lines[-1]["current_steps"] == 2
    assert (output / "adapter_config.json").is_file()
    assert not (project / "saves").exists()  # the original output_dir was not touched
