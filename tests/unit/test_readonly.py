"""The read-only guarantee: reading and patching never change, add or remove a file in the user's tree."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from oomdoctor.diagnosis import Proposal
from oomdoctor.errors import BadInput
from oomdoctor.facts.config import read_config
from oomdoctor.patch import load_deepspeed_template, write_patched_config
from oomdoctor.resources import configs_dir


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file and folder under root: content hash (or "dir") and modification time in ns."""
    out: dict[str, tuple[str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            p = Path(dirpath, name)
            out[str(p.relative_to(root))] = ("dir", p.stat().st_mtime_ns)
        for name in filenames:
            p = Path(dirpath, name)
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def _proposal(changes, **kw) -> Proposal:
    text = {"en": "x", "zh": "x"}
    return Proposal(
        rule="r.test", title=text, changes=changes, why=text, cost=text, judge=text, cause="activations", **kw
    )


@pytest.fixture
def user_tree(tmp_path: Path) -> Path:
    root = tmp_path / "LLaMA-Factory"
    (root / "configs").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "dataset_info.json").write_text('{"keywords_train": {"file_name": "k.json"}}')
    (root / "data" / "k.json").write_text("[]")
    (root / "examples" / "deepspeed").mkdir(parents=True)
    (root / "examples" / "deepspeed" / "ds_z2_config.json").write_text(
        json.dumps({"zero_optimization": {"stage": 2}})
    )
    config = (configs_dir() / "keywords_clean_train.yaml").read_text(encoding="utf-8")
    config += "deepspeed: examples/deepspeed/ds_z2_config.json\nmax_samples: 1000\n"
    (root / "configs" / "keywords_clean_train.yaml").write_text(config, encoding="utf-8")
    (root / "saves" / "Qwen3-0.6B-Thinking" / "lora" / "keywords-clean").mkdir(parents=True)
    (root / "saves" / "Qwen3-0.6B-Thinking" / "lora" / "keywords-clean" / "trainer_log.jsonl").write_text(
        "{}\n"
    )
    return root


def test_reading_and_patching_leave_the_user_tree_alone(user_tree, tmp_path, monkeypatch):
    monkeypatch.chdir(user_tree)
    config = user_tree / "configs" / "keywords_clean_train.yaml"
    before = snapshot(user_tree)

    read_config(config)
    write_patched_config(
        config,
        _proposal(
            {
                "per_device_train_batch_size": [4, 2],
                "gradient_accumulation_steps": [8, 16],
                "max_samples": [1000, None],
            }
        ),
        tmp_path / "trials" / "t1",
    )
    write_patched_config(
        config,
        _proposal(
            {"deepspeed": ["examples/deepspeed/ds_z2_config.json", "ds_z3_offload_config.json"]},
            files={"ds_z3_offload_config.json": load_deepspeed_template("ds_z3_offload_config.json")},
            env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        ),
        tmp_path / "trials" / "t2",
    )
    with pytest.raises(BadInput):  # refused: the folder exists
        write_patched_config(config, _proposal({"cutoff_len": [2048, 1024]}), tmp_path / "trials" / "t1")

    assert snapshot(user_tree) == before


def test_patching_inside_the_user_tree_adds_only_the_new_folder(user_tree, monkeypatch):
    monkeypatch.chdir(user_tree)
    config = user_tree / "configs" / "keywords_clean_train.yaml"
    before = snapshot(user_tree)
    result = write_patched_config(config, _proposal({"cutoff_len": [2048, 1024]}), "trials/cutoff-1024")
    after = snapshot(user_tree)
    added = sorted(set(after) - set(before))
    assert added == [
        "trials",
        "trials/cutoff-1024",
        "trials/cutoff-1024/change.json",
        "trials/cutoff-1024/command.sh",
        "trials/cutoff-1024/config.yaml",
    ]
    assert {k: v for k, v in after.items() if k in before and k != "."} == before
    assert result.folder == user_tree / "trials" / "cutoff-1024"


def test_a_failed_patch_leaves_nothing_behind(user_tree, tmp_path, monkeypatch):
    monkeypatch.chdir(user_tree)
    config = user_tree / "configs" / "keywords_clean_train.yaml"
    out_parent = tmp_path / "trials"
    out_parent.mkdir()
    with pytest.raises(BadInput):  # stale: the config says 4, the proposal expected 8
        write_patched_config(config, _proposal({"per_device_train_batch_size": [8, 4]}), out_parent / "t")
    assert list(out_parent.iterdir()) == []
