"""Model shapes: config.json in a local folder, the Hugging Face and ModelScope caches, the built-in table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomdoctor.facts.model import (
    _table,
    count_params,
    find_config_json,
    model_from_config_dict,
    model_from_name,
    read_model,
)
from oomdoctor.facts.types import ConfigFacts

# Qwen3-0.6B's published config.json (the fields that matter here).
QWEN3_06B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 1024,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def _config(name: str, path: str = "<inline>") -> ConfigFacts:
    return ConfigFacts(path=path, raw={"model_name_or_path": name}, model_name_or_path=name)


@pytest.mark.parametrize(
    "name",
    [
        "Qwen/Qwen3-0.6B",
        "qwen3-0.6b",
        "/data/models/Qwen3-0.6B",
        "Qwen3-0.6B-Thinking",  # the WebUI label the course's output folder uses
        "Qwen3-0___6B",  # ModelScope's cache folder name
        "Qwen/Qwen3-0.6B-Base",
        "unsloth/Qwen3-0.6B-unsloth-bnb-4bit",
    ],
)
def test_qwen3_names_all_find_the_same_row(name: str) -> None:
    model = model_from_name(name)
    assert model is not None
    assert model.source == "table:qwen3-0.6b"
    assert (model.hidden_size, model.num_layers, model.vocab_size) == (1024, 28, 151936)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3-8b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
        ("meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b"),
        ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b-v0.1"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
        ("google/gemma-2-9b-it", "gemma-2-9b"),
        ("THUDM/glm-4-9b-chat-hf", "glm-4-9b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-r1-distill-qwen-7b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama-3-8b"),
        ("baichuan-inc/Baichuan2-13B-Chat", "baichuan2-13b"),
        ("01-ai/Yi-1.5-6B-Chat", "yi-6b"),
        ("microsoft/phi-1_5", "phi-1.5"),
        ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini"),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("Qwen/Qwen2-72B-Instruct", "qwen2-72b"),
        ("Qwen/Qwen1.5-7B-Chat", "qwen1.5-7b"),
        ("Qwen/Qwen-7B-Chat", "qwen-7b"),
        ("Qwen/QVQ-72B-Preview", "qwen2-vl-72b"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl-7b"),
    ],
)
def test_common_hub_names(name: str, key: str) -> None:
    model = model_from_name(name)
    assert model is not None, name
    assert model.source == f"table:{key}"


def test_unknown_names_are_none() -> None:
    assert model_from_name("acme/NotAModel-7B") is None
    assert model_from_name("") is None
    assert model_from_name("Qwen3-0.7B") is None  # close to a real name is not a match


def test_every_table_row_matches_its_published_parameter_count() -> None:
    """The shape in the table, counted, lands within 3 % of the published count (catches typos)."""
    checked = 0
    for row in _table()["models"]:
        if "params_b" not in row:
            continue
        model = model_from_name(row["key"])
        assert model is not None and model.params is not None
        assert model.params / 1e9 == pytest.approx(row["params_b"], rel=0.03), row["key"]
        checked += 1
    assert checked >= 35


def test_params_from_shape_count_attention_mlp_norms_and_tied_head() -> None:
    model = model_from_config_dict(QWEN3_06B)
    h, layers, vocab = 1024, 28, 151936
    attention = h * 2048 + 2 * h * 1024 + 2048 * h + 2 * 128  # q, k, v, o, q_norm, k_norm
    mlp = 3 * h * 3072
    expected = vocab * h + layers * (attention + mlp + 2 * h) + h  # tied: no separate lm_head
    assert model.params == expected
    untied = model_from_config_dict({**QWEN3_06B, "tie_word_embeddings": False})
    assert untied.params == expected + vocab * h


def test_moe_counts_all_experts_but_activates_top_k() -> None:
    model = model_from_name("Qwen/Qwen3-30B-A3B")
    assert model is not None
    assert model.num_experts == 128 and model.num_experts_per_tok == 8
    assert model.params is not None and model.params_active is not None
    assert 29e9 < model.params < 32e9
    assert 3.0e9 < model.params_active < 3.6e9


def test_nested_text_config_of_a_vision_language_model() -> None:
    raw = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "num_hidden_layers": 34,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "intermediate_size": 10240,
            "vocab_size": 262208,
        },
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
    }
    model = model_from_config_dict(raw)
    assert (model.hidden_size, model.num_layers, model.vocab_size) == (2560, 34, 262208)
    assert model.tie_word_embeddings is True  # Gemma's default when config.json does not say
    assert model.norms_per_layer == 4 and model.qk_norm


def test_count_params_agrees_with_the_table_row_for_the_same_shape() -> None:
    from_json = model_from_config_dict(QWEN3_06B)
    from_table = model_from_name("Qwen/Qwen3-0.6B")
    assert from_table is not None
    assert from_json.params == from_table.params
    total, active, embedding = count_params(from_json)
    assert total == active == from_json.params
    assert embedding == 151936 * 1024


def test_local_folder_config_json_wins_over_the_table(tmp_path: Path) -> None:
    folder = tmp_path / "my-finetuned-qwen"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN3_06B, "num_hidden_layers": 4}), encoding="utf-8")
    model = read_model(_config(str(folder)))
    assert model.source == f"config.json:{folder / 'config.json'}"
    assert model.num_layers == 4


def test_relative_path_is_resolved_against_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (tmp_path / "models" / "tiny" / "config.json").write_text(json.dumps(QWEN3_06B), encoding="utf-8")
    config = _config("models/tiny", path=str(tmp_path / "train.yaml"))
    assert read_model(config).source.startswith("config.json:")


def test_hugging_face_cache_snapshot_from_refs_main(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-0.6B"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text(json.dumps(QWEN3_06B), encoding="utf-8")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123", encoding="utf-8")
    env = {"HF_HOME": str(tmp_path), "HOME": str(tmp_path / "home")}
    found = find_config_json("Qwen/Qwen3-0.6B", environ=env)
    assert found == repo / "snapshots" / "abc123" / "config.json"
    assert read_model(_config("Qwen/Qwen3-0.6B"), environ=env).source.startswith("config.json:")


def test_hf_hub_cache_variable_is_honoured(tmp_path: Path) -> None:
    repo = tmp_path / "elsewhere" / "models--acme--Tiny"
    (repo / "snapshots" / "r1").mkdir(parents=True)
    (repo / "snapshots" / "r1" / "config.json").write_text(json.dumps(QWEN3_06B), encoding="utf-8")
    assert find_config_json("acme/Tiny", environ={"HF_HUB_CACHE": str(tmp_path / "elsewhere")}) is not None
    assert (
        find_config_json("acme/Tiny", environ={"HUGGINGFACE_HUB_CACHE": str(tmp_path / "elsewhere")})
        is not None
    )
    assert find_config_json("acme/Tiny", environ={"HF_HOME": str(tmp_path / "nothing")}) is None


@pytest.mark.parametrize(
    "layout", ["models/Qwen/Qwen3-0___6B", "Qwen/Qwen3-0___6B", "models/Qwen/Qwen3-0.6B"]
)
def test_modelscope_cache_layouts(tmp_path: Path, layout: str) -> None:
    folder = tmp_path / "ms" / layout
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(QWEN3_06B), encoding="utf-8")
    found = find_config_json("Qwen/Qwen3-0.6B", environ={"MODELSCOPE_CACHE": str(tmp_path / "ms")})
    assert found == folder / "config.json"


def test_unreadable_config_json_falls_back_to_the_table(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen3-0.6B"
    folder.mkdir()
    (folder / "config.json").write_text("{not json", encoding="utf-8")
    model = read_model(_config(str(folder)))
    assert model.source == "table:qwen3-0.6b"


def test_unknown_model_reads_as_unknown() -> None:
    model = read_model(_config("acme/NotAModel-7B"))
    assert model.source == "unknown"
    assert model.hidden_size is None
