"""A real ``oomdoctor trial`` of the tiny Qwen3 through ``llamafactory-cli train``: LoRA SFT, eval, save."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest
import yaml

from fixtures.commands import offline_env, oomdoctor
from fixtures.tiny_qwen3 import tiny_train_config

pytestmark = pytest.mark.integration


def test_real_trial_of_the_tiny_model(
    llamafactory_cli: Path, tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    # the user's config asks for 50 steps with eval and save every 50: the trial cuts it to 3
    user_config = tmp_path / "train.yaml"
    config = tiny_train_config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path / "saves" / "run", steps=50)
    user_config.write_text("# my tiny run\n" + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    out = tmp_path / "trial"

    launcher = f"{offline_env(tmp_path / 'hf')} {shlex.quote(str(llamafactory_cli))} train"
    done = oomdoctor("trial", "--config", str(user_config), "--steps", "3", "--out", str(out),
                     "--launcher", launcher, "--timeout", "300")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step 3/3" in done.stdout and "Trial finished normally." in done.stdout

    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["exit_code"] == 0 and result["outcome"] == "ok" and result["oom"] is False
    assert result["steps_done"] == 3 and result["total_steps"] == 3
    assert result["train_runtime_s"] > 0
    assert result["eval_loss"] is not None and result["eval_loss"] > 0
    assert result["checkpoints"] == ["checkpoint-3"]
    assert result["vram_allocated_gib"] == 0.0  # RECORD_VRAM reached LLaMA-Factory (no CUDA: 0)
    assert result["peak_source"] == "host_rss" and result["peak_memory_mib"] > 100
    assert result["dataset_fingerprint"].startswith("sha256:")
    assert result["env_overrides"]["RECORD_VRAM"] == "1"

    ran = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert ran["max_steps"] == 3 and ran["eval_steps"] == 3 and ran["save_steps"] == 3
    assert ran["output_dir"] == str(out.resolve() / "output")
    assert (out / "config.yaml").read_text(encoding="utf-8").startswith("# my tiny run")
    assert (out / "output" / "checkpoint-3").is_dir()
    assert not (tmp_path / "saves").exists()  # the user's output_dir is not touched

    with (out / "gpu-samples.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 5 and {r["gpu"] for r in rows} == {"host"}
    assert max(float(r["memory_used_mib"]) for r in rows) > 100
    times = [float(r["time_s"]) for r in rows]
    assert times == sorted(times) and all(0.1 < b - a < 2.0 for a, b in zip(times, times[1:], strict=False))

    log = (out / "train.log").read_text(encoding="utf-8")
    assert "***** Running training *****" in log and "\r" not in log
