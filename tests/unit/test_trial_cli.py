"""``oomdoctor trial`` (with the fake launcher) and ``oomdoctor compare`` on its folders: exit codes, output."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from fixtures.verbs import run_verb

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_launcher.py"


def launcher(*env: str) -> str:
    return " ".join([*env, shlex.quote(sys.executable), shlex.quote(str(FAKE))])


@pytest.fixture
def config(tmp_path: Path, tiny_dataset_dir: Path) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "model_name_or_path": "tiny",
                "stage": "sft",
                "dataset": "tiny_train",
                "dataset_dir": str(tiny_dataset_dir),
                "per_device_train_batch_size": 2,
                "output_dir": "saves/x",
            }
        )  # fmt: skip
    )
    return path


def test_trial_prints_progress_and_summary(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t1"
    code = run_verb("trial", ["--config", str(config), "--steps", "3", "--out", str(out), "--launcher", launcher(),
                              "--interval", "0.05"])  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "step 3/3" in text and "peak so far" in text
    assert "Trial finished normally." in text
    assert "Steps: 3/3; eval loss 8.3400; last checkpoint checkpoint-3" in text
    assert f"Trial folder: {out.resolve()}" in text
    assert (out / "result.json").is_file()


def test_failed_trial_exits_one_and_json_goes_to_stdout(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t2"
    code = run_verb("trial", ["--config", str(config), "--steps", "3", "--out", str(out), "--json",
                              "--launcher", launcher("FAKE_MODE=fail")], lang="zh")  # fmt: skip
    assert code == 1
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert (
        record["exit_code"] == 3 and record["outcome"] == "failed" and record["folder"] == str(out.resolve())
    )
    assert "试跑:3 步" in captured.err  # progress goes to stderr with --json


def test_trial_bad_input_exits_two(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_verb("trial", ["--config", str(config), "--out", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert run_verb("trial", ["--config", str(tmp_path / "none.yaml"), "--out", str(tmp_path / "n")]) == 2
    assert (
        run_verb("trial", ["--config", str(config), "--out", str(tmp_path / "n"), "--launcher", "nope-xyz"])
        == 2
    )
    assert "nope-xyz" in capsys.readouterr().err
    assert not (tmp_path / "n").exists()


def test_compare_verb_on_trials_and_configs(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    assert (
        run_verb(
            "trial", ["--config", str(config), "--steps", "2", "--out", str(first), "--launcher", launcher()]
        )
        == 0
    )
    halved = tmp_path / "halved.yaml"
    halved.write_text(
        config.read_text().replace("per_device_train_batch_size: 2", "per_device_train_batch_size: 1")
    )
    assert (
        run_verb(
            "trial", ["--config", str(halved), "--steps", "2", "--out", str(second), "--launcher", launcher()]
        )
        == 0
    )
    capsys.readouterr()

    assert run_verb("compare", [str(first), str(second)]) == 0
    text = capsys.readouterr().out
    assert "Trials compared" in text and "(reference)" in text
    assert "b vs a: per_device_train_batch_size 2 -> 1" in text

    assert run_verb("compare", [str(first), str(second), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in data["trials"]] == ["a", "b"] and data["comparable"] is True

    assert run_verb("compare", [str(config), str(halved)], lang="zh") == 0
    assert "配置对比" in capsys.readouterr().out
    assert run_verb("compare", [str(config), str(halved), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["targets_memory"] == ["per_device_train_batch_size"]

    assert run_verb("compare", [str(config), str(first)]) == 2  # a config and a trial: which one?
    assert run_verb("compare", [str(config)]) == 2
    assert run_verb("compare", [str(tmp_path)]) == 2  # not a trial folder
    assert "result.json" in capsys.readouterr().err
