"""``oomdoctor diagnose`` end to end: real files, the real readers, the exit codes and both languages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rule_cases import CONFIGS_DIR, LOGS_DIR

from oomdoctor.cli import main

CONTRACT_KEYS = {
    "oom",
    "phase",
    "cause",
    "step",
    "requested_mib",
    "capacity_mib",
    "free_mib",
    "reserved_unallocated_mib",
    "findings",
    "proposal",
    "alternatives",
    "questions",
}


@pytest.fixture
def run_files(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "train.yaml"
    shutil.copy(CONFIGS_DIR / "course.yaml", config)
    log = tmp_path / "train.log"
    log.write_text(
        (LOGS_DIR / "_banner.txt").read_text() + (LOGS_DIR / "long_sample.txt").read_text(), "utf-8"
    )
    return config, log


def test_json_contract_and_exit_1_for_an_oom(
    run_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, log = run_files
    before = config.read_bytes()
    code = main(["diagnose", "--config", str(config), "--log", str(log), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert set(out) >= CONTRACT_KEYS
    assert out["oom"] is True and out["phase"] == "long_sample" and out["step"] == 30
    assert out["proposal"]["rule"] == "long_sample.halve_micro_batch"
    assert out["proposal"]["changes"] == {
        "per_device_train_batch_size": [4, 2],
        "gradient_accumulation_steps": [8, 16],
    }
    assert {"rule", "changes", "why", "cost", "judge"} <= set(out["proposal"])
    assert config.read_bytes() == before  # the user's files are never touched


def test_no_oom_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "ok.log"
    log.write_text((LOGS_DIR / "_banner.txt").read_text() + (LOGS_DIR / "no_oom.txt").read_text(), "utf-8")
    code = main(["diagnose", "--log", str(log), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["oom"] is False and out["phase"] == "none" and out["proposal"] is None


def test_bad_answer_exits_2_with_one_line(
    run_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, log = run_files
    code = main(["diagnose", "--config", str(config), "--log", str(log), "--answer", "phase=middle"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "first_batch" in err


def test_bad_number_exits_2(run_files: tuple[Path, Path]) -> None:
    config, _ = run_files
    with pytest.raises(SystemExit) as info:
        main(["diagnose", "--config", str(config), "--gpu-mib", "-3"])
    assert info.value.code == 2


def test_missing_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose"]) == 2
    assert main(["diagnose", "--log", str(tmp_path / "nope.log")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_config_only_asks_the_phase_and_answers_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "train.yaml"
    shutil.copy(CONFIGS_DIR / "course.yaml", config)
    main(["diagnose", "--config", str(config), "--json"])
    out = json.loads(capsys.readouterr().out)
    # no log: "GPU or host memory?" and where it stopped, together
    assert out["phase"] == "unknown" and [q["key"] for q in out["questions"]] == ["memory_kind", "phase"]
    main(["diagnose", "--config", str(config), "--answer", "memory_kind=gpu", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["phase"] == "unknown" and out["questions"][0]["key"] == "phase"
    assert "eval" in out["questions"][0]["allowed"]
    main(["diagnose", "--config", str(config), "--answer", "phase=eval", "--json"])
    out = json.loads(capsys.readouterr().out)
    # no log: the answer places it, and "GPU or host memory?" is asked before any GPU-side change
    assert out["phase"] == "eval" and out["proposal"] is None
    assert [q["key"] for q in out["questions"]] == ["memory_kind"]
    main(
        [
            "diagnose",
            "--config",
            str(config),
            "--answer",
            "phase=eval",
            "--answer",
            "memory_kind=gpu",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["questions"] == [] and out["proposal"]["rule"] == "eval.match_train_micro_batch"
    assert out["proposal"]["changes"] == {"per_device_eval_batch_size": [8, 4]}
    main(
        [
            "diagnose",
            "--config",
            str(config),
            "--answer",
            "phase=eval",
            "--answer",
            "memory_kind=host",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["cause"] == "host_ram" and out["proposal"]["rule"].startswith("host_ram.")


def test_longest_tokens_reaches_the_rules(
    run_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, log = run_files
    main(["diagnose", "--config", str(config), "--log", str(log), "--longest-tokens", "957", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert "cutoff_above_longest" in {f["id"] for f in out["findings"]}
    assert "long_sample.measure_lengths" not in [a["rule"] for a in out["alternatives"]]


@pytest.mark.parametrize(
    ("lang", "heading", "why_word"), [("en", "Change one thing", "Why"), ("zh", "只改一项", "原因")]
)
def test_readable_report(
    run_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str], lang: str, heading: str, why_word: str
) -> None:
    config, log = run_files
    code = main(["--lang", lang, "diagnose", "--config", str(config), "--log", str(log)])
    text = capsys.readouterr().out
    assert code == 1
    assert heading in text and f"{why_word}:" in text
    assert "per_device_train_batch_size: 4 -> 2" in text
    assert f"oomdoctor patch --config {config} --log {log} --out <new folder>" in text
    assert "--rule long_sample.measure_lengths" not in text  # manual advice has no patch command
    if lang == "zh":
        assert "第 30 步" in text and "训练" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_report_lists_questions_with_answer_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lang: str
) -> None:
    config = tmp_path / "train.yaml"
    shutil.copy(CONFIGS_DIR / "course.yaml", config)
    code = main(["--lang", lang, "diagnose", "--config", str(config)])
    text = capsys.readouterr().out
    assert code == 1
    # One tier at a time: which memory and where, together; whether the weights loaded is the phase's to settle.
    assert "--answer memory_kind=<gpu|host|none>" in text  # no log: it may not have run out at all
    assert "--answer phase=<load|first_batch|long_sample|eval|save|optimizer_step>" in text
    assert "--answer weights_loaded=" not in text
    code = main(["--lang", lang, "diagnose", "--config", str(config), "--answer", "memory_kind=gpu"])
    text = capsys.readouterr().out
    assert code == 1
    assert "--answer phase=<load|first_batch|long_sample|eval|save|optimizer_step>" in text
    assert "--answer weights_loaded=" not in text and "--answer memory_kind=" not in text
    assert ("训练在哪一步停下" if lang == "zh" else "At which point did it stop?") in text
