"""configs/deepspeed/: the templates the rules write next to a patched config."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import pytest

from oomdoctor.facts.config import deepspeed_from_name, read_deepspeed
from oomdoctor.patch import deepspeed_template_names, load_deepspeed_template
from oomdoctor.patch.templates import deepspeed_templates_dir

# The names LLaMA-Factory's examples/deepspeed and its WebUI use; users recognise these.
EXPECTED = [
    "ds_z2_config.json",
    "ds_z2_offload_config.json",
    "ds_z3_config.json",
    "ds_z3_offload_config.json",
]


def _autos(node: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _autos(value, f"{prefix}{key}.")
    elif node == "auto":
        out.append(prefix[:-1])
    return out


def test_the_four_templates_are_shipped():
    assert deepspeed_template_names() == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_content_agrees_with_the_name(name):
    """What the JSON says (stage, which offloads) is what LLaMA-Factory's naming promises."""
    facts = read_deepspeed(name, deepspeed_templates_dir(), config_path="test")
    assert facts["deepspeed_found"] is True
    assert (facts["zero_stage"], facts["offload_optimizer"], facts["offload_param"]) == deepspeed_from_name(
        name
    )


@pytest.mark.parametrize("name", EXPECTED)
def test_batch_and_precision_are_left_to_the_trainer(name):
    ds = load_deepspeed_template(name)
    for key in (
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
    ):
        assert ds[key] == "auto", key
    assert ds["fp16"]["enabled"] == "auto" and ds["bf16"]["enabled"] == "auto"
    assert "optimizer" not in ds and "scheduler" not in ds  # the Trainer's optimizer and schedule are used


@pytest.mark.parametrize("name", EXPECTED)
def test_every_auto_is_one_the_installed_trainer_fills(name):
    """An "auto" the Trainer does not replace reaches DeepSpeed as a string and fails at start-up."""
    pytest.importorskip("transformers")
    import transformers.integrations.deepspeed as hf_ds

    source = inspect.getsource(hf_ds)
    filled = set(re.findall(r'fill_(?:match|only)\(\s*"([^"]+)"', source))
    filled |= set(re.findall(r'"(zero_optimization\.[a-z0-9_]+)"', source))
    unfilled = sorted(set(_autos(load_deepspeed_template(name))) - filled)
    assert unfilled == []


def test_zero3_templates_gather_weights_for_saving():
    for name in ("ds_z3_config.json", "ds_z3_offload_config.json"):
        assert (
            load_deepspeed_template(name)["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"]
            is True
        )


def test_templates_are_plain_json_files():
    for name in EXPECTED:
        json.loads((deepspeed_templates_dir() / name).read_text(encoding="utf-8"))


def test_name_without_suffix_and_unknown_names():
    assert load_deepspeed_template("ds_z3_config") == load_deepspeed_template("ds_z3_config.json")
    with pytest.raises(ValueError, match="ds_z9"):
        load_deepspeed_template("ds_z9_config.json")
    with pytest.raises(ValueError):
        load_deepspeed_template("../keywords_clean_train.yaml")
