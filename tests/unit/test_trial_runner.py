"""run_trial against a fake ``llamafactory-cli`` (tests/fixtures/fake_launcher.py): the folder contract, the
config that runs, the log streaming, the result facts, bad input, and stopping. The real LLaMA-Factory runs
are in tests/integration/."""

from __future__ import annotations

import csv
import json
import os
import shlex
import sys
import threading
from pathlib import Path

import pytest

from oomdoctor.errors import BadInput
from oomdoctor.facts.config import read_config
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import GpuDevice, GpuProcess
from oomdoctor.trial.runner import (
    TRIAL_ENV,
    dataset_fingerprint,
    parse_launcher,
    resolve_program,
    run_trial,
)

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_launcher.py"
NO_GPU = FakeGpuSource.unavailable("no NVIDIA GPU (test)")

CONFIG_TEXT = """\
# course-style config
model_name_or_path: Qwen/Qwen3-0.6B  # the model
stage: sft
do_train: true
finetuning_type: lora
dataset: tiny_train
eval_dataset: tiny_val
dataset_dir: {dataset_dir}
template: qwen3_nothink
cutoff_len: 2048
per_device_train_batch_size: 4   # batch
gradient_accumulation_steps: 8
eval_strategy: steps
eval_steps: 50
save_steps: 50
logging_steps: 10
max_steps: 50
fp16: true
report_to: wandb
output_dir: saves/qwen3/lora/keywords
"""


def fake_launcher(*env: str) -> str:
    return " ".join([*env, shlex.quote(sys.executable), shlex.quote(str(FAKE))])


@pytest.fixture
def config_path(tmp_path: Path, tiny_dataset_dir: Path) -> Path:
    path = tmp_path / "src" / "train.yaml"
    path.parent.mkdir()
    path.write_text(CONFIG_TEXT.format(dataset_dir=tiny_dataset_dir), encoding="utf-8")
    return path


def test_parse_launcher_splits_environment_from_command() -> None:
    assert parse_launcher("llamafactory-cli train") == ({}, ["llamafactory-cli", "train"])
    assert parse_launcher("FORCE_TORCHRUN=1 NNODES=1 llamafactory-cli train") == (
        {"FORCE_TORCHRUN": "1", "NNODES": "1"},
        ["llamafactory-cli", "train"],
    )
    assert parse_launcher("prlimit --as=4294967296 llamafactory-cli train")[1][:2] == [
        "prlimit",
        "--as=4294967296",
    ]
    assert parse_launcher("A='x y' deepspeed --num_gpus 2 src/train.py") == (
        {"A": "x y"},
        ["deepspeed", "--num_gpus", "2", "src/train.py"],
    )
    with pytest.raises(BadInput):
        parse_launcher("FOO=1")
    with pytest.raises(BadInput):
        parse_launcher("'unclosed")


def test_resolve_program_finds_path_and_venv_neighbours(tmp_path: Path) -> None:
    assert resolve_program("sh", os.environ.get("PATH")) is not None
    assert resolve_program(sys.executable, None) == sys.executable
    assert resolve_program("definitely-not-a-program-xyz", "/nonexistent") is None
    # beside this Python (a venv used without activating it), even when PATH does not have it
    assert resolve_program(Path(sys.executable).name, str(tmp_path)) is not None


def test_ok_trial_writes_the_folder_contract(config_path: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    progress: list[tuple[int, int | None]] = []
    snapshots: list[object] = []
    out = tmp_path / "trial-a"
    result = run_trial(
        config_path,
        steps=3,
        out_dir=out,
        launcher=fake_launcher("FAKE_MODE=print_env", "FAKE_PRINT_ENV=RECORD_VRAM,FAKE_MODE"),
        source=NO_GPU,
        interval_s=0.05,
        on_line=lines.append,
        on_progress=lambda p: progress.append((p.steps_done, p.total_steps)),
        on_sample=snapshots.append,
    )
    assert result.ok and result.exit_code == 0 and result.outcome == "ok"
    assert sorted(p.name for p in out.iterdir()) == [
        "config.yaml", "gpu-samples.csv", "output", "result.json", "train.log"
    ]  # fmt: skip

    # config.yaml: the given config, cut to 3 steps, comments kept, output inside the folder
    ran = (out / "config.yaml").read_text(encoding="utf-8")
    assert "# course-style config" in ran and "# batch" in ran and "# the model" in ran
    raw = read_config(out / "config.yaml").raw
    assert raw["max_steps"] == 3 and raw["save_steps"] == 3 and raw["eval_steps"] == 3
    assert raw["logging_steps"] == 1 and raw["report_to"] == "none"
    assert raw["output_dir"] == str(out.resolve() / "output")
    assert raw["per_device_train_batch_size"] == 4  # nothing else touched
    assert "max_steps: 50" in config_path.read_text()  # the user's file is untouched

    # train.log: merged output, \r progress redraws as lines, the child saw the trial environment
    log = (out / "train.log").read_text(encoding="utf-8")
    assert "\r" not in log
    assert " 33%|###       | 1/3 [00:01<00:00, 1.00it/s]" in log.splitlines()
    assert "ENV RECORD_VRAM=1" in log and "ENV FAKE_MODE=print_env" in log
    assert lines == log.splitlines()

    # samples: host RSS of the process tree (no GPU here)
    rows = list(csv.DictReader((out / "gpu-samples.csv").open(newline="")))
    assert rows and all(r["gpu"] == "host" for r in rows) and float(rows[0]["memory_used_mib"]) > 0
    assert snapshots

    record = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert record == result.record
    assert record["exit_code"] == 0 and record["timed_out"] is False and record["oom"] is False
    assert record["steps_done"] == 3 and record["total_steps"] == 3 and record["steps_requested"] == 3
    assert record["eval_loss"] == pytest.approx(8.34)
    assert record["train_runtime_s"] == pytest.approx(0.45)
    assert record["checkpoints"] == ["checkpoint-3"]
    assert record["peak_source"] == "host_rss" and record["peak_memory_mib"] > 0
    assert record["peak_memory_mib_per_gpu"]["host"] == record["peak_memory_mib"]
    assert record["vram_allocated_gib"] == 0.0
    assert record["model_name_or_path"] == "Qwen/Qwen3-0.6B" and record["precision"] == "fp16"
    assert record["dataset_fingerprint"].startswith("sha256:")
    assert record["gpu_name"] is None and record["gpu_reason"] == "no NVIDIA GPU (test)"
    assert record["env_overrides"] == {
        "FAKE_MODE": "print_env", "FAKE_PRINT_ENV": "RECORD_VRAM,FAKE_MODE", **TRIAL_ENV
    }  # fmt: skip
    assert record["argv"][-1] == str(out.resolve() / "config.yaml")
    assert record["trial_overrides"]["max_steps"] == [50, 3]
    assert record["wall_s"] > 0
    assert progress and progress[-1] == (3, 3)


def test_failed_trial_keeps_its_log(config_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "trial-fail"
    result = run_trial(
        config_path, steps=3, out_dir=out, launcher=fake_launcher("FAKE_MODE=fail"), source=NO_GPU
    )
    assert not result.ok and result.exit_code == 3 and result.outcome == "failed"
    assert "RuntimeError: boom" in (out / "train.log").read_text()
    assert result.record["steps_done"] == 1 and result.record["checkpoints"] == []


def test_killed_from_outside_counts_as_out_of_memory(config_path: Path, tmp_path: Path) -> None:
    result = run_trial(
        config_path,
        steps=3,
        out_dir=tmp_path / "t",
        launcher=fake_launcher("FAKE_MODE=killed"),
        source=NO_GPU,
    )
    assert result.record["signal"] == "SIGKILL" and result.exit_code == -9
    assert result.record["oom"] is True and result.record["oom_kind"] == "killed"
    assert result.outcome == "oom" and not result.ok


def test_child_memory_counts_in_the_tree_peak(config_path: Path, tmp_path: Path) -> None:
    result = run_trial(
        config_path,
        steps=4,
        out_dir=tmp_path / "t",
        launcher=fake_launcher("FAKE_CHILD_MB=150", "FAKE_STEP_S=0.4"),
        source=NO_GPU,
        interval_s=0.05,
    )
    assert result.ok
    assert result.peak_memory_mib is not None and result.peak_memory_mib > 150


def test_gpu_samples_and_other_processes_are_reported(config_path: Path, tmp_path: Path) -> None:
    card = GpuDevice(index=0, name="Tesla V100-SXM2-32GB", total_mib=32768.0, used_mib=1200.0,
                     compute_capability=(7, 0), processes=[GpuProcess(pid=999, used_mib=1100.0, name="python")])  # fmt: skip
    frames = [[(0, 1200.0, 32768.0, 0.0, 40.0)], [(0, 28588.0, 32768.0, 99.0, 250.0)], [(0, 16066.0, 32768.0, 50.0, 120.0)]]  # fmt: skip
    lines: list[str] = []
    result = run_trial(
        config_path,
        steps=3,
        out_dir=tmp_path / "t",
        launcher=fake_launcher(),
        source=FakeGpuSource([card], frames=frames),
        interval_s=0.05,
        on_line=lines.append,
    )
    assert result.record["peak_source"] == "nvml"
    assert result.peak_memory_mib == 28588.0 and result.record["peak_memory_mib_per_gpu"] == {"0": 28588.0}
    assert result.record["gpu_name"] == "Tesla V100-SXM2-32GB" and result.record["gpu_total_mib"] == 32768.0
    assert result.other_gpu_processes == [{"gpu": 0, "pid": 999, "name": "python", "used_mib": 1100.0}]
    assert result.record["other_gpu_processes"] == result.other_gpu_processes
    assert lines[0].startswith("[oomdoctor]") and "pid 999" in lines[0]
    rows = list(csv.DictReader((result.folder / "gpu-samples.csv").open(newline="")))
    assert {r["gpu"] for r in rows} == {"0"} and rows[0]["power_w"] == "40.0"


def test_stop_event_ends_the_trial(config_path: Path, tmp_path: Path) -> None:
    stop = threading.Event()

    def on_line(line: str) -> None:
        if "Running training" in line:
            stop.set()

    result = run_trial(
        config_path,
        steps=3,
        out_dir=tmp_path / "t",
        launcher=fake_launcher("FAKE_MODE=hang", f"FAKE_PID_FILE={tmp_path / 'pids'}"),
        source=NO_GPU,
        on_line=on_line,
        stop=stop,
        grace_s=2,
    )
    assert result.record["stopped"] is True and result.outcome == "stopped" and not result.ok
    assert result.record["survivors_stopped"] >= 2  # the launcher and its sleeping child
    for pid in map(int, (tmp_path / "pids").read_text().split()):
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_change_json_is_copied_and_its_environment_applied(config_path: Path, tmp_path: Path) -> None:
    change = {"rule": "fragmentation.expandable_segments", "env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
              "changes": {}}  # fmt: skip
    (config_path.parent / "change.json").write_text(json.dumps(change))
    result = run_trial(
        config_path,
        steps=2,
        out_dir=tmp_path / "t",
        launcher=fake_launcher("FAKE_MODE=print_env", "FAKE_PRINT_ENV=PYTORCH_CUDA_ALLOC_CONF"),
        source=NO_GPU,
    )
    assert json.loads((result.folder / "change.json").read_text()) == change
    assert "ENV PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in (result.folder / "train.log").read_text()
    assert result.record["env_overrides"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_bad_input_writes_nothing(config_path: Path, tmp_path: Path) -> None:
    existing = tmp_path / "exists"
    existing.mkdir()
    with pytest.raises(BadInput, match="already exists"):
        run_trial(config_path, steps=3, out_dir=existing, launcher=fake_launcher(), source=NO_GPU)
    assert list(existing.iterdir()) == []
    out = tmp_path / "new"
    with pytest.raises(BadInput, match="--steps"):
        run_trial(config_path, steps=0, out_dir=out, launcher=fake_launcher(), source=NO_GPU)
    with pytest.raises(BadInput, match="--timeout"):
        run_trial(config_path, steps=3, out_dir=out, timeout_s=0, launcher=fake_launcher(), source=NO_GPU)
    with pytest.raises(BadInput, match="not-a-launcher-xyz"):
        run_trial(config_path, steps=3, out_dir=out, launcher="not-a-launcher-xyz train", source=NO_GPU)
    with pytest.raises(BadInput):
        run_trial(tmp_path / "missing.yaml", steps=3, out_dir=out, launcher=fake_launcher(), source=NO_GPU)
    assert not out.exists()


def test_dataset_fingerprint_follows_file_contents(
    config_path: Path, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    config = read_config(config_path)
    first = dataset_fingerprint(config, tmp_path)
    assert first.startswith("sha256:") and first == dataset_fingerprint(config, tmp_path)

    copy = tmp_path / "data-copy"
    copy.mkdir()
    for f in tiny_dataset_dir.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    config.dataset_dir = str(copy)
    assert dataset_fingerprint(config, tmp_path) == first  # same bytes, other place: same data
    (copy / "tiny_train.json").write_text("[]")
    assert dataset_fingerprint(config, tmp_path) != first

    config.dataset = ["not_in_info"]
    assert dataset_fingerprint(config, tmp_path) == "unknown"
    info = json.loads((copy / "dataset_info.json").read_text())
    info["hub_set"] = {"hf_hub_url": "someone/some-set"}
    (copy / "dataset_info.json").write_text(json.dumps(info))
    config.dataset = ["hub_set"]
    assert dataset_fingerprint(config, tmp_path) == "unknown"
    config.dataset_dir = "relative-data"
    (tmp_path / "relative-data").mkdir()
    assert dataset_fingerprint(config, tmp_path) == "unknown"  # no dataset_info.json there


def test_duplicate_keys_are_refused_before_anything_runs(tmp_path: Path, tiny_dataset_dir: Path) -> None:
    # LLaMA-Factory (OmegaConf) refuses a key written twice; the trial says so instead of running a guess
    config = tmp_path / "dup.yaml"
    text = CONFIG_TEXT.format(dataset_dir=tiny_dataset_dir) + "per_device_train_batch_size: 2  # again\n"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(BadInput, match="duplicate key"):
        run_trial(config, steps=2, out_dir=tmp_path / "t", launcher=fake_launcher(), source=NO_GPU)
    assert not (tmp_path / "t").exists()


def test_trial_modules_import_light() -> None:
    import subprocess

    code = (
        "import sys, oomdoctor.trial.runner, oomdoctor.trial.compare, oomdoctor.trial.sampler, oomdoctor.facts.gpu;"
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("torch", "transformers", "llamafactory", "textual", "pynvml", "psutil", "ruamel"):
        assert f"'{heavy}'" not in loaded, heavy


def test_relative_paths_run_from_where_they_resolve(
    tmp_path: Path, tiny_dataset_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a LLaMA-Factory checkout: data/ at the top, the config under configs/; the user is somewhere else
    project = tmp_path / "LLaMA-Factory"
    (project / "configs").mkdir(parents=True)
    (project / "data").mkdir()
    for f in tiny_dataset_dir.iterdir():
        (project / "data" / f.name).write_bytes(f.read_bytes())
    config = project / "configs" / "train.yaml"
    config.write_text(CONFIG_TEXT.format(dataset_dir="data"), encoding="utf-8")
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = run_trial(config, steps=2, out_dir="t", launcher=fake_launcher(), source=NO_GPU)
    assert result.folder == elsewhere / "t"
    assert result.record["cwd"] == str(project)
    assert result.record["dataset_fingerprint"].startswith("sha256:")
