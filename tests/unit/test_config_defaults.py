"""lf_defaults.yaml against the installed LLaMA-Factory: the defaults, the key set, the course config.

Skipped where llamafactory is not installed (it is the `train` extra). When a new LLaMA-Factory changes a
default, these tests name the key, and lf_defaults.yaml is the one place to update.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import pytest
import yaml

from oomdoctor.facts.config import lf_knowledge, read_config
from oomdoctor.resources import configs_dir

llamafactory = pytest.importorskip("llamafactory", reason="llamafactory (the train extra) is not installed")


def _installed_fields() -> dict[str, Any]:
    from llamafactory.hparams.parser import _TRAIN_ARGS

    out: dict[str, Any] = {}
    for cls in _TRAIN_ARGS:
        for f in dataclasses.fields(cls):
            if not f.init or f.name in out:
                continue
            if f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = dataclasses.MISSING
            out[f.name] = value.value if isinstance(value, enum.Enum) else value
    return out


def test_installed_version_is_the_one_described():
    assert llamafactory.__version__ == lf_knowledge()["llamafactory_version"]


def test_every_default_matches_the_installed_dataclasses():
    installed = _installed_fields()
    mismatched = {
        key: (ours, installed.get(key, "<no such field>"))
        for key, ours in lf_knowledge()["defaults"].items()
        if key not in installed or installed[key] != ours or type(installed[key]) is not type(ours)
    }
    assert mismatched == {}


def test_known_keys_are_exactly_the_train_parser_keys():
    installed = set(_installed_fields())
    ours = set(lf_knowledge()["known_keys"])
    assert sorted(installed - ours) == [] and sorted(ours - installed) == []


def test_course_config_is_a_valid_llamafactory_config(tmp_path):
    """get_train_args validates every argument without loading the model (which is not on this machine) or
    the dataset (keywords_train lives in the course's data/ folder): what it can check, it checks."""
    from llamafactory.hparams import get_train_args

    raw = yaml.safe_load((configs_dir() / "keywords_clean_train.yaml").read_text(encoding="utf-8"))
    raw["output_dir"] = str(tmp_path / "out")  # a fresh folder, so no resume logic kicks in
    model_args, data_args, training_args, finetuning_args, _ = get_train_args(raw)
    ours = read_config(configs_dir() / "keywords_clean_train.yaml")
    assert training_args.per_device_train_batch_size == ours.per_device_train_batch_size == 4
    assert training_args.per_device_eval_batch_size == ours.per_device_eval_batch_size == 8
    assert training_args.gradient_accumulation_steps == ours.gradient_accumulation_steps
    assert training_args.eval_steps == ours.eval_steps == 50
    assert training_args.do_eval is ours.do_eval is True
    assert training_args.fp16 is True and ours.precision == "fp16"
    assert finetuning_args.lora_alpha == ours.lora_alpha == 16
    assert data_args.cutoff_len == ours.cutoff_len
    assert data_args.eval_dataset == ours.eval_dataset
    assert model_args.disable_gradient_checkpointing is False and ours.gradient_checkpointing


@pytest.mark.parametrize(
    "raw",
    [
        {"eval_strategy": "steps", "logging_steps": 7, "eval_dataset": "v"},
        {"eval_strategy": "steps", "eval_steps": 0, "logging_steps": 3, "eval_dataset": "v"},
        {"eval_strategy": "no", "do_eval": True, "eval_dataset": "v"},
        {"lora_rank": 4},
    ],
)
def test_derived_values_agree_with_the_parser(raw, tmp_path):
    from llamafactory.hparams import get_train_args

    full = {
        "model_name_or_path": "Qwen/Qwen3-0.6B",
        "stage": "sft",
        "do_train": True,
        "dataset": "t",
        "template": "qwen3_nothink",
        "output_dir": str(tmp_path / "o"),
        **raw,
    }
    _m, _d, training_args, finetuning_args, _g = get_train_args(full)
    ours = read_config_from(full)
    assert training_args.eval_steps == ours.eval_steps
    assert finetuning_args.lora_alpha == ours.lora_alpha
    assert training_args.optim.value == ours.optim


def read_config_from(raw: dict[str, Any]):
    from oomdoctor.facts.config import config_from_mapping

    return config_from_mapping(raw)
