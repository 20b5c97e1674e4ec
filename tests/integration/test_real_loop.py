"""The product loop end to end, for real: a trial that runs out of memory in its first validation, the
diagnosis, the patch, a second trial of the patched config that passes, and the comparison of the two.

Training uses batch 1, validation a batch of 32 long samples: the validation forward alone needs
32 x 2048 x 16384 x 4 B = 4 GiB of logits, under a cap of (address space needed to start training) + 1.5 GiB.
The course's rule for that case lowers per_device_eval_batch_size and never touches the training batch.
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
EVAL_BATCH = 32
CUTOFF = 2048
SLACK_MIB = 1536


def test_eval_spike_is_fixed_by_one_change_and_compared(llamafactory_cli: Path, tmp_path: Path) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    model = build_tiny_qwen3(tmp_path / "model", vocab_size=VOCAB)
    data = write_tiny_dataset(tmp_path / "data", n=4, n_val=EVAL_BATCH, words_per_sample=(1500, 2500))
    config = tiny_train_config(model, data, tmp_path / "saves", steps=1, batch=1, cutoff_len=CUTOFF)
    config["per_device_eval_batch_size"] = EVAL_BATCH
    user_config = tmp_path / "train.yaml"
    user_config.write_text("# my run\n" + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    before = user_config.read_bytes()

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    probe = tmp_path / "probe.yaml"
    probe.write_text(yaml.safe_dump({**config, "output_dir": str(tmp_path / "probe-out")}), encoding="utf-8")
    cap_mib = load_address_space_mib([str(llamafactory_cli), "train", str(probe)], env) + SLACK_MIB
    launcher = f"{offline_env(tmp_path / 'hf')} {prlimit} --as={cap_mib * 2**20} {shlex.quote(str(llamafactory_cli))} train"

    # 1. the baseline trial runs out in validation, after its training step
    baseline = tmp_path / "trials" / "00-baseline"
    done = oomdoctor("trial", "--config", str(user_config), "--steps", "1", "--out", str(baseline),
                     "--launcher", launcher, "--timeout", "300")  # fmt: skip
    result = json.loads((baseline / "result.json").read_text(encoding="utf-8"))
    assert done.returncode == 1, (cap_mib, (baseline / "train.log").read_text(encoding="utf-8")[-3000:])
    assert (result["oom"], result["phase"], result["steps_done"]) == (True, "eval", 1)

    # 2. the diagnosis of that trial: the eval batch, not the training batch
    diagnosed = oomdoctor(
        "diagnose", "--config", str(user_config), "--log", str(baseline / "train.log"), "--json"
    )
    diagnosis = json.loads(diagnosed.stdout)
    assert (diagnosis["phase"], diagnosis["cause"]) == ("eval", "eval_batch")
    changes = diagnosis["proposal"]["changes"]
    assert changes["per_device_eval_batch_size"][0] == EVAL_BATCH
    assert changes["per_device_eval_batch_size"][1] < EVAL_BATCH
    assert "per_device_train_batch_size" not in changes and "gradient_accumulation_steps" not in changes

    # 3. the patch, into a new folder; the user's config is untouched
    change_dir = tmp_path / "trials" / "01-eval-batch"
    patched = oomdoctor("patch", "--config", str(user_config), "--log", str(baseline / "train.log"),
                        "--out", str(change_dir))  # fmt: skip
    assert patched.returncode == 0, patched.stderr
    assert user_config.read_bytes() == before
    new_config = yaml.safe_load((change_dir / "config.yaml").read_text(encoding="utf-8"))
    assert new_config["per_device_eval_batch_size"] == changes["per_device_eval_batch_size"][1]
    assert new_config["per_device_train_batch_size"] == 1

    # 4. the trial of the patched config passes validation and saves
    run = change_dir / "run"
    done = oomdoctor("trial", "--config", str(change_dir / "config.yaml"), "--steps", "1", "--out", str(run),
                     "--launcher", launcher, "--timeout", "300")  # fmt: skip
    fixed = json.loads((run / "result.json").read_text(encoding="utf-8"))
    assert done.returncode == 0, (run / "train.log").read_text(encoding="utf-8")[-3000:]
    assert fixed["oom"] is False and fixed["steps_done"] == 1 and fixed["eval_loss"] is not None

    # 5. the comparison tells the two apart and names the one change
    compared = oomdoctor("compare", str(baseline), str(run), "--json")
    table = json.loads(compared.stdout)
    first, second = table["trials"]
    assert (first["name"], second["name"]) == ("00-baseline", "01-eval-batch/run")
    assert (first["outcome"], second["outcome"]) == ("oom", "ok")
    assert second["change"]["rule"] == diagnosis["proposal"]["rule"]
    assert {c["field"] for c in second["config_changes"]} == {"per_device_eval_batch_size"}
