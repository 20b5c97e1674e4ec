"""patch/writer.py: the new trial folder, the edited config, change.json, the diff and the command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from oomdoctor import __version__
from oomdoctor.diagnosis import EstimatedEffect, Proposal
from oomdoctor.errors import BadInput
from oomdoctor.facts.config import read_config
from oomdoctor.patch import load_deepspeed_template, write_patched_config
from oomdoctor.resources import configs_dir

COURSE = configs_dir() / "keywords_clean_train.yaml"


def proposal(
    changes=None, *, rule="first_batch.halve_micro_batch", env=None, files=None, manual=False
) -> Proposal:
    return Proposal(
        rule=rule,
        title={"en": "Halve the micro-batch", "zh": "单卡 batch 减半"},
        changes=changes
        if changes is not None
        else {"per_device_train_batch_size": [4, 2], "gradient_accumulation_steps": [8, 16]},
        why={"en": "Activations grow with the micro-batch.", "zh": "激活随 batch 增长。"},
        cost={"en": "Slower: 300 s -> 560 s.", "zh": "更慢:300 秒 -> 560 秒。"},
        judge={"en": "Total train batch size stays 32.", "zh": "总批次保持 32。"},
        cause="activations",
        env=env or {},
        files=files or {},
        manual=manual,
        effect=EstimatedEffect(before_mib=30000.0, after_mib=18000.0, fits_after=True),
    )


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """The course config in a LLaMA-Factory-like checkout: configs/ and data/ side by side."""
    root = tmp_path / "LLaMA-Factory"
    (root / "configs").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "dataset_info.json").write_text("{}")
    path = root / "configs" / "keywords_clean_train.yaml"
    path.write_bytes(COURSE.read_bytes())
    return path


def changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]


# ------------------------------------------------------------------------------- the edited config


def test_changed_keys_keep_their_line_and_comment(course, tmp_path, monkeypatch):
    monkeypatch.chdir(course.parent.parent)
    result = write_patched_config(course, proposal(), tmp_path / "trial-1")
    before = course.read_text(encoding="utf-8").splitlines()
    after = result.config_path.read_text(encoding="utf-8").splitlines()
    i = next(n for n, line in enumerate(before) if line.startswith("per_device_train_batch_size:"))
    assert (
        after[i]
        == "per_device_train_batch_size: 2  # oomdoctor: was 4 | 单卡批处理大小:每张卡每个小批次处理 4 条样本"
    )
    j = next(n for n, line in enumerate(before) if line.startswith("gradient_accumulation_steps:"))
    assert after[j].startswith("gradient_accumulation_steps: 16  # oomdoctor: was 8 | 梯度累积步数")
    # every other line is byte for byte what the user wrote, in the same order (output_dir aside)
    untouched = [n for n in range(len(before)) if n not in (i, j) and not before[n].startswith("output_dir:")]
    assert [after[n] for n in untouched] == [before[n] for n in untouched]
    assert len(after) == len(before)


def test_diff_shows_only_the_change_and_output_dir(course, tmp_path):
    result = write_patched_config(course, proposal(), tmp_path / "t")
    lines = changed_lines(result.diff)
    assert len(lines) == 6
    assert {line.split(":")[0][1:] for line in lines} == {
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "output_dir",
    }
    assert result.diff.startswith(f"--- {course}\n+++ {result.config_path}\n")


def test_new_keys_are_appended_under_the_rule_id(course, tmp_path):
    p = proposal({"per_device_eval_batch_size": [8, 2]}, rule="eval.smaller_eval_batch")
    result = write_patched_config(course, p, tmp_path / "t")
    text = result.config_path.read_text(encoding="utf-8")
    assert text.endswith(
        "\n# oomdoctor: eval.smaller_eval_batch\nper_device_eval_batch_size: 2  # oomdoctor: was 8 (LLaMA-Factory default)\n"
    )
    assert read_config(result.config_path).per_device_eval_batch_size == 2


def test_removed_key_leaves_a_comment(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text("a: 1\nmax_samples: 1000  # for a quick look\n# section\nb: 2\n", encoding="utf-8")
    result = write_patched_config(src, proposal({"max_samples": [1000, None]}), tmp_path / "t")
    text = result.config_path.read_text(encoding="utf-8")
    assert "# oomdoctor: removed max_samples: 1000\n# section\nb: 2\n" in text
    assert "max_samples" not in yaml.safe_load(text)


def test_user_spellings_survive(tmp_path):
    """ruamel's dumper would turn True into true and ~ into nothing; untouched lines must not change."""
    src = tmp_path / "c.yaml"
    original = (
        "trust_remote_code: True\n"
        "adapter_name_or_path: ~\n"
        "lora_target: 'q_proj,v_proj'   # quoted on purpose\n"
        "learning_rate: 1.0e-4\n"
        "report_to:\n"
        "    - none\n"
        "per_device_train_batch_size: 4\n"
        "gradient_accumulation_steps: 8\n"
    )
    src.write_text(original, encoding="utf-8")
    result = write_patched_config(src, proposal(), tmp_path / "t")
    text = result.config_path.read_text(encoding="utf-8")
    assert text.startswith(original.split("per_device")[0])


def test_string_quotes_and_types_are_kept(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text("optim: 'adamw_torch'\nlearning_rate: 5.0e-5\nflash_attn: auto\n", encoding="utf-8")
    p = proposal(
        {
            "optim": ["adamw_torch", "adamw_8bit"],
            "learning_rate": [5e-5, 2.5e-5],
            "flash_attn": ["auto", "sdpa"],
        }
    )
    result = write_patched_config(src, p, tmp_path / "t")
    text = result.config_path.read_text(encoding="utf-8")
    assert "optim: 'adamw_8bit'  # oomdoctor: was 'adamw_torch'" in text
    assert "learning_rate: 2.5e-05  # oomdoctor: was 5.0e-5" in text
    loaded = yaml.safe_load(text)
    assert loaded["learning_rate"] == 2.5e-5 and isinstance(loaded["learning_rate"], float)


def test_webui_string_values_become_numbers(tmp_path):
    src = tmp_path / "training_args.yaml"
    src.write_text("per_device_train_batch_size: '4'\ngradient_accumulation_steps: '8'\n", encoding="utf-8")
    result = write_patched_config(src, proposal(), tmp_path / "t")
    loaded = yaml.safe_load(result.config_path.read_text(encoding="utf-8"))
    assert loaded["per_device_train_batch_size"] == 2 and loaded["gradient_accumulation_steps"] == 16


def test_crlf_files_stay_crlf(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_bytes(b"per_device_train_batch_size: 4\r\ngradient_accumulation_steps: 8\r\n")
    result = write_patched_config(src, proposal(), tmp_path / "t")
    data = result.config_path.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_multiline_value_is_replaced_whole(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text("lora_target:\n  - q_proj\n  - v_proj\n\n# keep me\ncutoff_len: 2048\n", encoding="utf-8")
    result = write_patched_config(
        src, proposal({"lora_target": [["q_proj", "v_proj"], "all"]}), tmp_path / "t"
    )
    text = result.config_path.read_text(encoding="utf-8")
    assert text.startswith(
        'lora_target: all  # oomdoctor: was ["q_proj", "v_proj"]\n\n# keep me\ncutoff_len: 2048\n'
    )


def test_patching_a_patched_config_does_not_stack_markers(course, tmp_path):
    first = write_patched_config(course, proposal(), tmp_path / "t1")
    second = write_patched_config(
        first.config_path,
        proposal({"per_device_train_batch_size": [2, 1], "gradient_accumulation_steps": [16, 32]}),
        tmp_path / "t2",
    )
    text = second.config_path.read_text(encoding="utf-8")
    assert "per_device_train_batch_size: 1  # oomdoctor: was 2 | 单卡批处理大小" in text
    assert text.count("oomdoctor: was") == 3  # batch, accumulation, output_dir
    change = json.loads(second.change_json.read_text(encoding="utf-8"))
    assert change["parent"] == str(first.folder)


# --------------------------------------------------------------------------------------- output_dir


def test_fresh_output_dir_inside_the_folder(course, tmp_path):
    result = write_patched_config(course, proposal(), tmp_path / "t")
    c = read_config(result.config_path)
    assert c.output_dir == str(result.folder / "output")
    assert not Path(c.output_dir).exists()  # LLaMA-Factory creates it; nothing to resume from
    assert "# oomdoctor: was saves/Qwen3-0.6B-Thinking/lora/keywords-clean" in result.config_path.read_text(
        "utf-8"
    )


def test_output_dir_added_when_missing(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n", encoding="utf-8")
    result = write_patched_config(src, proposal(), tmp_path / "t")
    loaded = yaml.safe_load(result.config_path.read_text(encoding="utf-8"))
    assert loaded["output_dir"] == str(tmp_path / "t" / "output")


def test_proposal_cannot_pick_output_dir(course, tmp_path):
    p = proposal({"output_dir": ["x", "/somewhere/else"], "per_device_train_batch_size": [4, 2]})
    result = write_patched_config(course, p, tmp_path / "t")
    assert read_config(result.config_path).output_dir == str(tmp_path / "t" / "output")


# -------------------------------------------------------------------------------------- change.json


def test_change_json_contents(course, tmp_path):
    p = proposal(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    result = write_patched_config(course, p, tmp_path / "t")
    change = json.loads(result.change_json.read_text(encoding="utf-8"))
    assert change["parent"] == str(course)
    assert change["rule"] == "first_batch.halve_micro_batch"
    assert change["changes"] == {
        "per_device_train_batch_size": [4, 2],
        "gradient_accumulation_steps": [8, 16],
    }
    assert change["written"]["output_dir"] == [
        "saves/Qwen3-0.6B-Thinking/lora/keywords-clean",
        str(tmp_path / "t" / "output"),
    ]
    assert change["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    for key in ("why", "cost", "judge", "title"):
        assert set(change[key]) == {"en", "zh"}
    assert change["effect"]["after_mib"] == 18000.0
    assert change["oomdoctor_version"] == __version__
    assert change["created"].endswith("+00:00")
    assert change["command"] == result.command


def test_explicit_parent(course, tmp_path):
    result = write_patched_config(course, proposal(), tmp_path / "t", parent="trials/base")
    assert json.loads(result.change_json.read_text(encoding="utf-8"))["parent"] == "trials/base"


# ------------------------------------------------------------------------------------------ command


def test_command_without_env(course, tmp_path, monkeypatch):
    monkeypatch.chdir(course.parent.parent)
    result = write_patched_config(course, proposal(), tmp_path / "t")
    assert result.command == f"llamafactory-cli train {result.config_path}"
    assert result.run_dir == course.parent.parent


def test_command_with_env_prefix(course, tmp_path, monkeypatch):
    monkeypatch.chdir(course.parent.parent)
    p = proposal(
        {},
        rule="fragmentation.expandable_segments",
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    )
    result = write_patched_config(course, p, tmp_path / "t")
    assert (
        result.command
        == f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True llamafactory-cli train {result.config_path}"
    )
    assert changed_lines(result.diff)[1].startswith("+output_dir:")  # only output_dir changed


def test_command_quotes_paths_with_spaces(course, tmp_path, monkeypatch):
    monkeypatch.chdir(course.parent.parent)
    result = write_patched_config(course, proposal(), tmp_path / "my trials" / "t 1")
    assert shlex.split(result.command) == ["llamafactory-cli", "train", str(result.config_path)]


def test_relative_paths_kept_and_command_runs_from_where_they_resolve(course, tmp_path, monkeypatch):
    """dataset_dir: data resolves from the LLaMA-Factory root, not from configs/; run from elsewhere, the
    command starts with cd to that root."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = write_patched_config(course, proposal(), tmp_path / "t")
    root = course.parent.parent
    assert read_config(result.config_path).dataset_dir == "data"  # kept as written
    assert result.run_dir == root
    assert shlex.split(result.command) == [
        "cd",
        str(root),
        "&&",
        "llamafactory-cli",
        "train",
        str(result.config_path),
    ]
    change = json.loads(result.change_json.read_text(encoding="utf-8"))
    assert change["run_dir"] == str(root)
    assert change["relative_paths"]["dataset_dir"] == {"value": "data", "resolved": [str(root / "data")]}
    assert change["relative_paths"]["model_name_or_path"]["resolved"] == [None]  # a hub id, not a folder


def test_cwd_wins_when_paths_resolve_there(course, tmp_path, monkeypatch):
    other = tmp_path / "other"
    (other / "data").mkdir(parents=True)
    monkeypatch.chdir(other)
    result = write_patched_config(course, proposal(), tmp_path / "t")
    assert result.run_dir == other and not result.command.startswith("cd ")


def test_absolute_paths_need_no_run_dir(tmp_path):
    src = tmp_path / "c.yaml"
    (tmp_path / "data").mkdir()  # a new folder is never put inside the run's dataset_dir
    src.write_text(
        f"dataset_dir: {tmp_path / 'data'}\ndataset: x\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n",
        encoding="utf-8",
    )
    result = write_patched_config(src, proposal(), tmp_path / "t")
    assert result.run_dir is None and result.command.startswith("llamafactory-cli train ")


# ------------------------------------------------------------------------------------------ DeepSpeed


def test_deepspeed_template_written_beside_config(course, tmp_path, monkeypatch):
    monkeypatch.chdir(course.parent.parent)
    template = load_deepspeed_template("ds_z3_offload_config")
    p = proposal(
        {"deepspeed": [None, "ds_z3_offload_config.json"]},
        rule="optimizer_step.zero3_offload",
        files={"ds_z3_offload_config.json": template},
    )
    result = write_patched_config(course, p, tmp_path / "t")
    written = result.folder / "ds_z3_offload_config.json"
    assert result.files == [written]
    assert json.loads(written.read_text(encoding="utf-8")) == template
    c = read_config(result.config_path)
    assert c.deepspeed == str(written) and c.deepspeed_found
    assert (c.zero_stage, c.offload_optimizer, c.offload_param) == (3, True, True)
    # LLaMA-Factory refuses DeepSpeed outside torchrun, even on one GPU
    assert result.command == f"FORCE_TORCHRUN=1 llamafactory-cli train {result.config_path}"


def test_deepspeed_key_set_from_files_alone(course, tmp_path):
    p = proposal(
        {}, files={"ds_z2_offload_config.json": load_deepspeed_template("ds_z2_offload_config.json")}
    )
    result = write_patched_config(course, p, tmp_path / "t")
    assert read_config(result.config_path).offload_optimizer is True
    assert json.loads(result.change_json.read_text("utf-8"))["written"]["deepspeed"][1] == str(
        result.folder / "ds_z2_offload_config.json"
    )


# ----------------------------------------------------------------------------------------- refusals


def test_existing_out_dir_is_bad_input(course, tmp_path):
    (tmp_path / "t").mkdir()
    with pytest.raises(BadInput) as err:
        write_patched_config(course, proposal(), tmp_path / "t")
    assert "already exists" in str(err.value) and "已存在" in str(err.value)
    assert list((tmp_path / "t").iterdir()) == []


def test_out_dir_parents_are_created(course, tmp_path):
    result = write_patched_config(course, proposal(), tmp_path / "a" / "b" / "t")
    assert result.config_path.is_file()
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["t"]  # no staging folder left behind


def test_missing_config_is_bad_input(tmp_path):
    with pytest.raises(BadInput):
        write_patched_config(tmp_path / "none.yaml", proposal(), tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_stale_proposal_is_bad_input(course, tmp_path):
    with pytest.raises(BadInput) as err:
        write_patched_config(course, proposal({"per_device_train_batch_size": [8, 4]}), tmp_path / "t")
    assert "per_device_train_batch_size" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "t").exists()


def test_manual_advice_has_nothing_to_write(course, tmp_path):
    with pytest.raises(ValueError):
        write_patched_config(course, proposal({}, manual=True), tmp_path / "t")


@pytest.mark.parametrize("name", ["../evil.json", "config.yaml", "change.json", "sub/x.json"])
def test_file_names_must_be_plain(course, tmp_path, name):
    with pytest.raises(ValueError):
        write_patched_config(course, proposal(files={name: {}}), tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_flow_style_config_cannot_be_edited_in_place(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text("{per_device_train_batch_size: 4, gradient_accumulation_steps: 8}\n", encoding="utf-8")
    with pytest.raises(BadInput, match="in place"):
        write_patched_config(src, proposal(), tmp_path / "t")


def test_duplicate_keys_are_bad_input(tmp_path):
    src = tmp_path / "c.yaml"
    src.write_text(
        "per_device_train_batch_size: 4\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n"
    )
    with pytest.raises(BadInput):
        write_patched_config(src, proposal(), tmp_path / "t")
