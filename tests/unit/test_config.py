"""facts/config.py: defaults applied, derived fields, WebUI strings, DeepSpeed, unknown keys, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomdoctor.errors import BadInput
from oomdoctor.facts.config import (
    config_from_mapping,
    deepspeed_from_name,
    lf_defaults,
    load_yaml_mapping,
    read_config,
)
from oomdoctor.resources import configs_dir

COURSE = configs_dir() / "keywords_clean_train.yaml"


def write(tmp_path: Path, text: str, name: str = "train.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ defaults


def test_empty_ish_config_gets_llamafactory_defaults():
    c = config_from_mapping({"model_name_or_path": "Qwen/Qwen3-0.6B"})
    assert c.per_device_train_batch_size == 8
    assert c.per_device_eval_batch_size == 8
    assert c.per_device_eval_batch_size_set is False
    assert c.gradient_accumulation_steps == 1
    assert c.cutoff_len == 2048
    assert c.optim == "adamw_torch_fused"  # transformers 5.x default, not adamw_torch
    assert (c.quantization_method, c.quantization_type, c.double_quantization) == ("bnb", "nf4", True)
    assert c.quantization_bit is None
    assert c.flash_attn == "auto"
    assert (c.lora_rank, c.lora_alpha, c.lora_target) == (8, 16, "all")
    assert c.gradient_checkpointing is True and c.gradient_checkpointing_by_default is True
    assert c.num_train_epochs == 3.0
    assert c.max_steps is None
    assert c.precision == "fp32"
    assert c.stage == "sft" and c.finetuning_type == "lora"
    assert c.dataset_dir == "data"
    assert c.do_eval is False and c.eval_steps is None
    assert c.logging_steps == 500 and c.save_steps == 500
    assert c.effective_batch == 8
    assert c.unknown_keys == []


def test_defaults_come_from_the_data_file():
    defaults = lf_defaults()
    c = config_from_mapping({})
    assert c.per_device_train_batch_size == defaults["per_device_train_batch_size"]
    assert c.cutoff_len == defaults["cutoff_len"]
    assert c.optim == defaults["optim"]


def test_lora_alpha_unset_is_twice_the_rank():
    assert config_from_mapping({"lora_rank": 16}).lora_alpha == 32
    assert config_from_mapping({"lora_rank": 16, "lora_alpha": 8}).lora_alpha == 8


# ------------------------------------------------------------------------------------------- derived


@pytest.mark.parametrize(
    ("batch", "accumulation", "world_size", "expected"),
    [(4, 8, None, 32), (2, 16, 1, 32), (4, 8, 4, 128), (1, 1, 0, 1)],
)
def test_effective_batch(batch, accumulation, world_size, expected):
    c = config_from_mapping(
        {"per_device_train_batch_size": batch, "gradient_accumulation_steps": accumulation},
        world_size=world_size,
    )
    assert c.effective_batch == expected
    assert c.world_size == (world_size if world_size else 1)


@pytest.mark.parametrize(
    ("raw", "precision"),
    [
        ({}, "fp32"),
        ({"fp16": True}, "fp16"),
        ({"bf16": True}, "bf16"),
        ({"bf16": True, "fp16": True}, "bf16"),
        ({"pure_bf16": True}, "pure_bf16"),
        ({"pure_bf16": True, "bf16": True}, "pure_bf16"),
    ],
)
def test_precision(raw, precision):
    assert config_from_mapping(raw).precision == precision


def test_gradient_checkpointing_switches():
    off = config_from_mapping({"disable_gradient_checkpointing": True})
    assert off.gradient_checkpointing is False and off.gradient_checkpointing_by_default is False
    explicit = config_from_mapping({"disable_gradient_checkpointing": False})
    assert explicit.gradient_checkpointing is True and explicit.gradient_checkpointing_by_default is False
    trainer = config_from_mapping({"disable_gradient_checkpointing": True, "gradient_checkpointing": True})
    assert trainer.gradient_checkpointing is True and trainer.gradient_checkpointing_by_default is False


@pytest.mark.parametrize(
    ("raw", "do_eval"),
    [
        ({"eval_strategy": "steps", "eval_dataset": "v"}, True),
        ({"eval_strategy": "epoch", "val_size": 0.1, "dataset": "t"}, True),
        ({"eval_strategy": "steps"}, False),  # no eval data: LLaMA-Factory would refuse, nothing evaluates
        ({"eval_strategy": "no", "eval_dataset": "v"}, False),
        ({"do_eval": True, "eval_dataset": "v"}, True),  # evaluates once after training
        ({"val_size": 0.0000001, "eval_strategy": "steps", "dataset": "t"}, False),
    ],
)
def test_do_eval(raw, do_eval):
    assert config_from_mapping(raw).do_eval is do_eval


def test_eval_steps_follow_transformers():
    assert config_from_mapping({"eval_strategy": "steps", "logging_steps": 5}).eval_steps == 5
    assert (
        config_from_mapping({"eval_strategy": "steps", "eval_steps": 0, "logging_steps": 5}).eval_steps == 5
    )
    assert config_from_mapping({"eval_strategy": "steps"}).eval_steps == 500
    assert config_from_mapping({"eval_strategy": "steps", "eval_steps": 50}).eval_steps == 50
    assert config_from_mapping({"eval_strategy": "steps", "eval_steps": 0.1}).eval_steps == 0.1  # a ratio
    assert config_from_mapping({"eval_strategy": "epoch", "eval_steps": 50}).eval_steps is None
    assert config_from_mapping({"eval_accumulation_steps": 4}).eval_accumulation_steps == 4


def test_packing_default_depends_on_stage():
    assert config_from_mapping({"stage": "pt"}).packing is True
    assert config_from_mapping({"stage": "sft"}).packing is False
    assert config_from_mapping({"neat_packing": True}).packing is True
    assert config_from_mapping({"stage": "pt", "packing": False}).packing is False


def test_quantization_and_lists():
    c = config_from_mapping(
        {
            "quantization_bit": 4,
            "quantization_type": "fp4",
            "double_quantization": False,
            "lora_target": ["q_proj", "v_proj"],
        }
    )
    assert (c.quantization_bit, c.quantization_type, c.double_quantization) == (4, "fp4", False)
    assert c.lora_target == "q_proj,v_proj"
    d = config_from_mapping({"dataset": "a, b,c", "eval_dataset": ["x", "y"]})
    assert d.dataset == ["a", "b", "c"] and d.eval_dataset == ["x", "y"]


def test_max_steps_positive_only():
    assert config_from_mapping({"max_steps": -1}).max_steps is None
    assert config_from_mapping({"max_steps": 20}).max_steps == 20


# --------------------------------------------------------------------------------- WebUI string values


def test_webui_strings_are_coerced(tmp_path):
    path = write(
        tmp_path,
        "per_device_train_batch_size: '4'\n"
        'gradient_accumulation_steps: "8"\n'
        "cutoff_len: '1024.0'\n"
        "fp16: 'true'\n"
        "bf16: 'False'\n"
        "disable_gradient_checkpointing: 'no'\n"
        "num_train_epochs: '3.0'\n"
        "val_size: '0.1'\n"
        "dataset: a\n"
        "eval_strategy: steps\n"
        "eval_steps: '100'\n"
        "quantization_bit: '4'\n"
        "double_quantization: 1\n",
        name="training_args.yaml",
    )
    c = read_config(path)
    assert c.per_device_train_batch_size == 4 and c.gradient_accumulation_steps == 8
    assert c.cutoff_len == 1024
    assert c.fp16 is True and c.bf16 is False and c.precision == "fp16"
    assert c.gradient_checkpointing is True and c.gradient_checkpointing_by_default is False
    assert c.num_train_epochs == 3.0 and c.val_size == 0.1
    assert c.eval_steps == 100 and c.do_eval is True
    assert c.quantization_bit == 4 and c.double_quantization is True
    assert c.effective_batch == 32


def test_bare_key_means_unset():
    c = config_from_mapping({"per_device_train_batch_size": None, "per_device_eval_batch_size": None})
    assert c.per_device_train_batch_size == 8
    assert c.per_device_eval_batch_size_set is False


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"per_device_train_batch_size": "four"}, "per_device_train_batch_size"),
        ({"per_device_train_batch_size": 0}, "per_device_train_batch_size"),
        ({"per_device_train_batch_size": 2.5}, "per_device_train_batch_size"),
        ({"gradient_accumulation_steps": True}, "gradient_accumulation_steps"),
        ({"fp16": "maybe"}, "fp16"),
        ({"fp16": 2}, "fp16"),
        ({"val_size": "a tenth"}, "val_size"),
        ({"cutoff_len": [1, 2]}, "cutoff_len"),
    ],
)
def test_values_that_cannot_be_coerced_are_bad_input(raw, field):
    with pytest.raises(BadInput) as err:
        config_from_mapping(raw, path="x.yaml")
    text = str(err.value)
    assert field in text and "\n" not in text and " / " in text  # one line, both languages


# -------------------------------------------------------------------------------------- unknown keys


def test_unknown_keys_are_kept_not_fatal():
    c = config_from_mapping(
        {"per_device_train_batch": 4, "evaluation_strategy": "steps", "cutoff_len": 512, "fp16": True}
    )
    assert c.unknown_keys == ["per_device_train_batch", "evaluation_strategy"]
    assert c.cutoff_len == 512
    assert c.raw["per_device_train_batch"] == 4


def test_known_keys_outside_the_defaults_are_not_unknown():
    c = config_from_mapping(
        {"learning_rate": 1e-4, "warmup_ratio": 0.1, "report_to": "none", "enable_thinking": False}
    )
    assert c.unknown_keys == []


# ----------------------------------------------------------------------------------------- DeepSpeed


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("examples/deepspeed/ds_z3_offload_config.json", (3, True, True)),
        ("ds_z3_config.json", (3, False, False)),
        ("llamaboard_cache/ds_z2_offload_config.json", (2, True, False)),
        ("ds_z2_config.json", (2, False, False)),
        ("ds_z0_config.json", (0, False, False)),
        ("my_zero.json", (None, False, False)),
    ],
)
def test_deepspeed_inferred_from_name(name, expected):
    assert deepspeed_from_name(name) == expected
    c = config_from_mapping({"deepspeed": name})
    assert (c.zero_stage, c.offload_optimizer, c.offload_param) == expected
    assert c.deepspeed == name and c.deepspeed_found is False and c.deepspeed_path is None


def test_deepspeed_json_next_to_config_is_read(tmp_path):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "custom.json").write_text(
        json.dumps(
            {
                "zero_optimization": {
                    "stage": 2,
                    "offload_optimizer": {"device": "cpu"},
                    "offload_param": {"device": "none"},
                }
            }
        )
    )
    path = write(tmp_path, "deepspeed: ds/custom.json\n")
    c = read_config(path)
    assert c.deepspeed_found is True
    assert c.deepspeed_path == str((tmp_path / "ds" / "custom.json").resolve())
    assert (c.zero_stage, c.offload_optimizer, c.offload_param) == (2, True, False)


def test_deepspeed_json_content_wins_over_its_name(tmp_path):
    # A file named like an offload template but without offload: the JSON is the truth.
    (tmp_path / "ds_z3_offload_config.json").write_text(json.dumps({"zero_optimization": {"stage": 3}}))
    c = read_config(write(tmp_path, "deepspeed: ds_z3_offload_config.json\n"))
    assert c.deepspeed_found is True
    assert (c.zero_stage, c.offload_optimizer, c.offload_param) == (3, False, False)


def test_deepspeed_json_found_from_cwd(tmp_path, monkeypatch):
    root = tmp_path / "LLaMA-Factory"
    (root / "examples" / "deepspeed").mkdir(parents=True)
    (root / "examples" / "deepspeed" / "z.json").write_text(
        json.dumps({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})
    )
    elsewhere = tmp_path / "configs"
    elsewhere.mkdir()
    path = write(elsewhere, "deepspeed: examples/deepspeed/z.json\n")
    monkeypatch.chdir(root)
    c = read_config(path)
    assert c.deepspeed_found and (c.zero_stage, c.offload_optimizer, c.offload_param) == (3, False, True)


def test_deepspeed_found_above_the_config_folder(tmp_path):
    root = tmp_path / "LLaMA-Factory"
    (root / "examples" / "deepspeed").mkdir(parents=True)
    (root / "examples" / "train_lora").mkdir(parents=True)
    (root / "examples" / "deepspeed" / "ds_z2_config.json").write_text(
        json.dumps({"zero_optimization": {"stage": 2}})
    )
    c = read_config(
        write(root / "examples" / "train_lora", "deepspeed: examples/deepspeed/ds_z2_config.json\n")
    )
    assert c.deepspeed_found and c.zero_stage == 2


def test_deepspeed_inline_dict():
    c = config_from_mapping(
        {"deepspeed": {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}}
    )
    assert c.deepspeed == "<inline>" and c.deepspeed_found
    assert (c.zero_stage, c.offload_optimizer, c.offload_param) == (3, True, False)


def test_malformed_deepspeed_json_is_bad_input(tmp_path):
    (tmp_path / "ds.json").write_text("{ not json")
    with pytest.raises(BadInput) as err:
        read_config(write(tmp_path, "deepspeed: ds.json\n"))
    assert "ds.json" in str(err.value) and "\n" not in str(err.value)


# -------------------------------------------------------------------------------------- bad input


def test_missing_file(tmp_path):
    with pytest.raises(BadInput) as err:
        read_config(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(err.value) and "找不到" in str(err.value)


def test_directory(tmp_path):
    with pytest.raises(BadInput, match="not a file"):
        read_config(tmp_path)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"a: [1, 2\nb: 3\n", "not valid YAML"),
        (b"key: value: other\n", "not valid YAML"),
        (b"- a\n- b\n", "expected a mapping"),
        (b"just a string\n", "expected a mapping"),
        (b"", "is empty"),
        (b"# only a comment\n", "is empty"),
        (b"\x00\x01\x02binary\xff", "binary"),
        ("cutoff_len: 1024 # 截断".encode("gbk"), "UTF-8"),
    ],
)
def test_unusable_files_are_bad_input_on_one_line(tmp_path, content, fragment):
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(BadInput) as err:
        load_yaml_mapping(path)
    text = str(err.value)
    assert fragment in text and "\n" not in text and " / " in text


def test_malformed_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(BadInput) as err:
        read_config(path)
    assert "line " in str(err.value)


def test_utf8_bom_is_fine(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeffcutoff_len: 1024  # 截断长度\n".encode())
    assert read_config(path).cutoff_len == 1024


def test_llamaboard_saved_arguments_file_is_bad_input(tmp_path):
    path = write(
        tmp_path,
        "top.model_name: Qwen3-0.6B\ntop.finetuning_type: lora\ntrain.batch_size: 4\ntrain.cutoff_len: 2048\n",
    )
    with pytest.raises(BadInput) as err:
        read_config(path)
    assert "training_args.yaml" in str(err.value)


# ---------------------------------------------------------------------------------- course config


def test_course_config_matches_the_chapter_table():
    c = read_config(COURSE)
    raw = c.raw
    expected = {
        "model_name_or_path": "Qwen/Qwen3-0.6B",
        "template": "qwen3_nothink",
        "enable_thinking": False,
        "dataset": "keywords_train",
        "eval_dataset": "keywords_validation",
        "val_size": 0,
        "cutoff_len": 2048,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 8,
        "num_train_epochs": 3,
        "optim": "adamw_torch",
        "learning_rate": 5.0e-5,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 5,
        "fp16": True,
        "bf16": False,
        "lora_rank": 8,
        "lora_alpha": 16,
        "lora_dropout": 0,
        "lora_target": "all",
        "logging_steps": 5,
        "eval_steps": 50,
        "save_steps": 50,
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "lora",
        "dataset_dir": "data",
        "output_dir": "saves/Qwen3-0.6B-Thinking/lora/keywords-clean",
        "eval_strategy": "steps",
    }
    assert {k: raw.get(k) for k in expected} == expected
    assert "per_device_eval_batch_size" not in raw  # left to LLaMA-Factory's default on purpose
    assert c.per_device_eval_batch_size == 8 and not c.per_device_eval_batch_size_set
    assert c.effective_batch == 32 and c.precision == "fp16" and c.do_eval and c.eval_steps == 50
    assert c.gradient_checkpointing_by_default and c.unknown_keys == []
    text = COURSE.read_text(encoding="utf-8")
    assert "# 单卡批处理大小" in text and "# 梯度累积步数" in text


def test_an_old_configs_evaluation_strategy_still_schedules_evaluation() -> None:
    """transformers < 4.46 called it evaluation_strategy; such a run still evaluated on that schedule."""
    from oomdoctor.facts.config import config_from_mapping

    old = config_from_mapping({"evaluation_strategy": "steps", "eval_steps": 50, "val_size": 0.1})
    assert (old.eval_strategy, old.eval_steps, old.do_eval) == ("steps", 50, True)
    assert "evaluation_strategy" in old.unknown_keys  # LLaMA-Factory 0.9.5 itself rejects the old name
    both = config_from_mapping({"evaluation_strategy": "steps", "eval_strategy": "no", "val_size": 0.1})
    assert both.eval_strategy == "no" and not both.do_eval  # the current name wins
