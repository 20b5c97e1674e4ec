"""Finding runs in a folder laid out the way LLaMA-Factory and its users lay it out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oomdoctor.discover import (
    display_path,
    find_runs,
    is_training_config,
    rule_short_name,
    suggest_trial_folder,
)

CONFIG = "model_name_or_path: Qwen/Qwen3-0.6B\nstage: sft\nfinetuning_type: lora\n"


def _write(path: Path, text: str, mtime_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime_s, mtime_s))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's working folder: WebUI output under saves/, a config under configs/, a nohup capture."""
    _write(tmp_path / "saves/Qwen3/lora/train_1/training_args.yaml", CONFIG, 1_000)
    _write(tmp_path / "saves/Qwen3/lora/train_1/running_log.txt", "step 1\n", 1_100)
    _write(tmp_path / "saves/Qwen3/lora/train_1/trainer_log.jsonl", "{}\n", 1_090)
    _write(tmp_path / "configs/qwen_lora.yaml", CONFIG, 2_000)
    _write(tmp_path / "qwen_lora.log", "Traceback\n", 2_100)
    _write(tmp_path / "nohup.out", "CUDA out of memory\n", 3_000)
    _write(tmp_path / "docker-compose.yaml", "services: {}\n", 5_000)  # not a training config
    _write(tmp_path / "configs/ds_z3.json", "{}", 5_000)  # DeepSpeed JSON: not a config by itself
    return tmp_path


def test_newest_first_and_pairs_by_folder_and_stem(project: Path) -> None:
    result = find_runs(project)
    runs = [
        (r.config and r.config.relative_to(project), r.log and r.log.relative_to(project))
        for r in result.runs
    ]
    assert runs == [
        (None, Path("nohup.out")),
        (Path("configs/qwen_lora.yaml"), Path("qwen_lora.log")),
        (
            Path("saves/Qwen3/lora/train_1/training_args.yaml"),
            Path("saves/Qwen3/lora/train_1/running_log.txt"),
        ),
    ]
    assert result.runs[1].mtime_s == 2_100  # the newer of config and log
    assert not result.stopped_early


def test_trial_folder_pairs_config_yaml_with_train_log(tmp_path: Path) -> None:
    _write(tmp_path / "trials/01-halve_micro_batch/config.yaml", CONFIG, 10)
    _write(tmp_path / "trials/01-halve_micro_batch/train.log", "x\n", 20)
    [run] = find_runs(tmp_path).runs
    assert run.config is not None and run.config.name == "config.yaml"
    assert run.log is not None and run.log.name == "train.log"
    assert run.folder == tmp_path / "trials/01-halve_micro_batch"


def test_lone_config_and_empty_folder(tmp_path: Path) -> None:
    assert find_runs(tmp_path).runs == []
    _write(tmp_path / "examples/train_lora/llama3_lora_sft.yaml", CONFIG, 10)
    [run] = find_runs(tmp_path).runs
    assert run.log is None and run.config is not None


def test_skips_hidden_env_and_checkpoint_folders(tmp_path: Path) -> None:
    _write(tmp_path / ".venv/lib/x.log", "x", 10)
    _write(tmp_path / "venv/y.log", "x", 10)
    _write(tmp_path / "saves/a/checkpoint-100/trainer_log.jsonl", "{}", 10)
    _write(tmp_path / "node_modules/z.log", "x", 10)
    assert find_runs(tmp_path).runs == []


def test_depth_budget_stops_and_says_so(tmp_path: Path) -> None:
    _write(tmp_path / "a/b/c/d/deep.log", "x", 10)
    result = find_runs(tmp_path, max_depth=2)
    assert result.runs == [] and result.stopped_early
    assert [r.log.name for r in find_runs(tmp_path, max_depth=4).runs if r.log] == ["deep.log"]


def test_entry_budget_bounds_a_huge_folder(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"file_{i:04d}.txt").write_text("")
    _write(tmp_path / "zzz.log", "x", 10)  # sorts last: beyond the budget
    result = find_runs(tmp_path, max_entries=100)
    assert result.stopped_early and result.entries_seen <= 101
    assert result.runs == []


def test_cancel_stops_the_scan(tmp_path: Path) -> None:
    _write(tmp_path / "a.log", "x", 10)
    result = find_runs(tmp_path, is_cancelled=lambda: True)
    assert result.cancelled and result.runs == []


def test_config_sniffing(tmp_path: Path) -> None:
    assert is_training_config(
        _write(tmp_path / "a.yaml", "# comment\nmodel_name_or_path: x\nstage: sft\n", 1)
    )
    assert not is_training_config(_write(tmp_path / "b.yaml", "name: model_name_or_path\n", 1))
    # a data file that only mentions a model (a package's table, nested keys) is not a run's config
    assert not is_training_config(
        _write(tmp_path / "c.yaml", "qwen3:\n  model_name_or_path: x\n  stage: sft\n", 1)
    )
    assert not is_training_config(_write(tmp_path / "d.yaml", "model_name_or_path: x\nlicense: mit\n", 1))
    assert not is_training_config(tmp_path / "missing.yaml")


def test_display_path_relative_demo_and_outside(tmp_path: Path) -> None:
    from oomdoctor.resources import configs_dir

    inside = tmp_path / "saves/x/running_log.txt"
    assert display_path(inside, tmp_path) == "saves/x/running_log.txt"
    assert display_path(configs_dir() / "demo" / "train.log", tmp_path) == "<demo>/demo/train.log"
    assert display_path(None, tmp_path) == ""


def test_suggest_trial_folder_numbers_after_existing(tmp_path: Path) -> None:
    first = suggest_trial_folder(tmp_path, "first_batch.halve_micro_batch")
    assert first == tmp_path / "trials/01-halve_micro_batch"
    (tmp_path / "trials/01-halve_micro_batch").mkdir(parents=True)
    (tmp_path / "trials/07-other").mkdir()
    assert suggest_trial_folder(tmp_path, "eval.set eval batch!") == tmp_path / "trials/08-set-eval-batch"


def test_rule_short_name() -> None:
    assert rule_short_name("first_batch.halve_micro_batch") == "halve_micro_batch"
    assert rule_short_name("...") == "change"


def test_trial_run_folder_never_reuses_one(tmp_path: Path) -> None:
    from oomdoctor.discover import trial_run_folder

    change = tmp_path / "trials/01-halve_micro_batch"
    assert trial_run_folder(change) == tmp_path / "trials/01-halve_micro_batch-trial"
    (tmp_path / "trials/01-halve_micro_batch-trial").mkdir(parents=True)
    assert trial_run_folder(change) == tmp_path / "trials/01-halve_micro_batch-trial-2"
    (tmp_path / "trials/01-halve_micro_batch-trial-2").mkdir()
    assert trial_run_folder(change) == tmp_path / "trials/01-halve_micro_batch-trial-3"
    # the next change is numbered after the trial folders too
    assert suggest_trial_folder(tmp_path, "eval.set_eval_batch") == tmp_path / "trials/02-set_eval_batch"


def test_trial_origin_goes_back_to_the_config_the_trial_was_made_from(tmp_path: Path) -> None:
    import json

    from oomdoctor.discover import trial_origin

    change = _write(tmp_path / "trials/01-halve_micro_batch/config.yaml", CONFIG, 10)
    trial = tmp_path / "trials/01-halve_micro_batch-trial"
    ran = _write(trial / "config.yaml", CONFIG + "max_steps: 50\n", 20)
    assert trial_origin(change) == (change, None)  # not a trial: as given
    (trial / "result.json").write_text(json.dumps({"source_config": str(change)}), encoding="utf-8")
    assert trial_origin(ran) == (change, trial)
    (trial / "result.json").write_text(
        json.dumps({"source_config": str(tmp_path / "gone.yaml")}), encoding="utf-8"
    )
    assert trial_origin(ran) == (ran, trial)  # the source is gone: what ran is all there is
    (trial / "result.json").write_text("{not json", encoding="utf-8")
    assert trial_origin(ran) == (ran, trial)


def test_run_folders_are_scanned_before_a_big_data_folder(tmp_path: Path) -> None:
    for i in range(30):
        data = tmp_path / f"data_{i:02d}" / "shards"
        data.mkdir(parents=True)
        for j in range(20):
            (data / f"part{j}.bin").write_bytes(b"")
    _write(tmp_path / "saves/Qwen3/lora/sft/training_args.yaml", CONFIG, 10)
    _write(tmp_path / "saves/Qwen3/lora/sft/running_log.txt", "x", 10)
    result = find_runs(tmp_path, max_entries=100)
    assert result.stopped_early
    assert [r.log.name for r in result.runs if r.log] == ["running_log.txt"]


def test_discover_stays_headless() -> None:
    import subprocess
    import sys

    code = "import sys, oomdoctor.discover, oomdoctor.commands.tui, oomdoctor.commands.demo; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
