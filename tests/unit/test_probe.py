"""Probe trials (trial/probe.py): the derived dataset, the milestones, and run_trial(probe=True).

Token counting goes through LLaMA-Factory's template in real use (tests/integration/test_real_probe.py); here
a counter over the rows' own text stands in for the tokenizer, so the planning and the runner's wiring are
checked in milliseconds with the fake launcher.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from oomdoctor.errors import BadInput
from oomdoctor.facts.config import read_config
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import ConfigFacts
from oomdoctor.trial.folder import TrialFolder
from oomdoctor.trial.probe import EVAL_NAME, TRAIN_NAME, MilestoneClock, milestones, plan_probe, read_vram
from oomdoctor.trial.runner import run_trial

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_launcher.py"


def words(config: ConfigFacts, names: Sequence[str]) -> dict[str, list[int]]:
    """Row lengths as the number of words of the row's text (the tokenizer's stand-in)."""
    info = json.loads((Path(config.dataset_dir) / "dataset_info.json").read_text())
    out = {}
    for name in names:
        rows = json.loads((Path(config.dataset_dir) / info[name]["file_name"]).read_text())
        out[name] = [len(" ".join(str(v) for v in row.values()).split()) for row in rows]
    return out


def _dataset(tmp_path: Path) -> Path:
    from fixtures.tiny_qwen3 import write_tiny_dataset

    data = write_tiny_dataset(tmp_path / "data", n=20, n_val=10, words_per_sample=(5, 60), seed=3)
    info = json.loads((data / "dataset_info.json").read_text())
    info["tiny_train"]["columns"] = {"prompt": "instruction", "query": "input", "response": "output"}
    (data / "dataset_info.json").write_text(json.dumps(info))
    return data


def _config(tmp_path: Path, data: Path, **extra: Any) -> Path:
    raw = {"model_name_or_path": "tiny", "stage": "sft", "dataset": "tiny_train", "dataset_dir": str(data),
           "eval_dataset": "tiny_val", "eval_strategy": "steps", "eval_steps": 10, "cutoff_len": 40,
           "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "per_device_eval_batch_size": 3,
           "output_dir": "saves/x", **extra}  # fmt: skip
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _digest(folder: Path) -> str:
    return hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    ).hexdigest()


def test_the_derived_dataset_puts_the_longest_rows_first(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    before = _digest(data)
    config = read_config(_config(tmp_path, data))
    plan = plan_probe(config, tmp_path / "trial" / "probe-data", steps=2, cwd=tmp_path, lengths=words)
    plan.write()
    lengths = words(config, ["tiny_train", "tiny_val"])
    train = [json.loads(line) for line in (plan.data_dir / f"{TRAIN_NAME}.jsonl").read_text().splitlines()]
    source = json.loads((data / "tiny_train.json").read_text())
    # batch 2 x accumulation 2 x 2 steps: the 8 longest rows, longest first, the rows themselves unchanged
    want = sorted(range(len(source)), key=lambda i: -lengths["tiny_train"][i])[:8]
    assert train == [source[i] for i in want]
    assert plan.longest_tokens == max(lengths["tiny_train"])
    evaluation = [
        json.loads(line) for line in (plan.data_dir / f"{EVAL_NAME}.jsonl").read_text().splitlines()
    ]
    assert len(evaluation) == 3 and plan.eval_longest_tokens == max(lengths["tiny_val"])
    info = json.loads((plan.data_dir / "dataset_info.json").read_text())
    assert info[TRAIN_NAME] == {"file_name": f"{TRAIN_NAME}.jsonl", "columns": {"prompt": "instruction",
                                "query": "input", "response": "output"}}  # fmt: skip
    assert plan.changes["dataset"] == TRAIN_NAME and plan.changes["eval_dataset"] == EVAL_NAME
    assert plan.changes["disable_shuffling"] is True and plan.changes["dataset_dir"] == str(plan.data_dir)
    assert plan.changes["media_dir"] == str(data.resolve())
    assert "longest first" in plan.how[0]["en"] and "最长" in plan.how[0]["zh"]
    assert _digest(data) == before  # the user's data is only read


def test_val_size_packing_and_grouping_are_said(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    path = _config(tmp_path, data, val_size=0.1, packing=True, group_by_length=True)
    raw = yaml.safe_load(path.read_text())
    raw.pop("eval_dataset")
    path.write_text(yaml.safe_dump(raw))
    plan = plan_probe(read_config(path), tmp_path / "p", steps=1, cwd=tmp_path, lengths=words)
    assert plan.changes["val_size"] == 0.0 and plan.eval is not None and plan.eval.source == "tiny_train"
    text = " ".join(note["en"] for note in plan.how)
    assert "val_size 0.1" in text and "packing is on" in text and "group_by_length is on" in text
    # packed: enough of the longest rows to fill 2 x 2 sequences of cutoff_len 40, not just 4 rows
    counts = sorted(
        (min(n, 40) for n in words(read_config(path), ["tiny_train"])["tiny_train"]), reverse=True
    )
    kept = sum(len(part.rows) for part in plan.train)
    assert sum(counts[:kept]) >= 4 * 40 > sum(counts[: kept - 1])


def test_hub_data_cannot_be_probed(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    (data / "dataset_info.json").write_text(json.dumps({"tiny_train": {"hf_hub_url": "someone/data"}}))
    config = read_config(_config(tmp_path, data, eval_dataset=None, eval_strategy="no"))
    with pytest.raises(BadInput, match="hub"):
        plan_probe(config, tmp_path / "p", steps=1, cwd=tmp_path, lengths=words)


def test_milestones_from_the_moments_seen() -> None:
    samples = [(0.5, 400.0), (1.0, 900.0), (2.0, 1500.0), (3.0, 1700.0), (4.0, 1200.0)]
    seen = {"load": {"time_s": 1.2, "step": 0}, "longest_batch": {"time_s": 2.5, "step": 1},
            "optimizer_step": {"time_s": 2.5, "step": 1}, "eval": {"time_s": 3.5, "step": 1}}  # fmt: skip
    vram = {"train": {"allocated": 1.5, "reserved": 2.0}}
    marks = milestones(seen, samples=samples, vram=vram, evaluates=True, failed_phase="save", end_s=4.5)
    assert [m["name"] for m in marks] == ["load", "longest_batch", "optimizer_step", "eval", "save"]
    assert [m["passed"] for m in marks] == [True, True, True, True, False]
    assert [m.get("peak_mib") for m in marks] == [900.0, 1500.0, 1500.0, 1700.0, 1700.0]
    assert marks[1]["vram_allocated_gib"] == 1.5 and marks[3]["phase_peak_mib"] == 1700.0
    assert marks[4]["reached"] is True and marks[4]["failed_phase"] == "save"


def test_a_failure_in_the_longest_batch_leaves_the_rest_unreached() -> None:
    marks = milestones({"load": {"time_s": 1.0, "step": 0}}, samples=[(0.5, 800.0), (1.5, 3000.0)], vram={},
                       evaluates=False, failed_phase="first_batch", end_s=2.0)  # fmt: skip
    assert [(m["name"], m["passed"]) for m in marks] == [("load", True), ("longest_batch", False),
        ("optimizer_step", False), ("eval", None), ("save", False)]  # fmt: skip
    assert marks[1]["reached"] and marks[1]["peak_mib"] == 3000.0 and not marks[2]["reached"]
    optimizer = milestones({"load": {"time_s": 1.0, "step": 0}}, samples=[], vram={}, evaluates=False,
                           failed_phase="optimizer_step", end_s=2.0)  # fmt: skip
    assert optimizer[1]["passed"] is True and optimizer[2]["passed"] is False


def test_the_clock_notes_lines_progress_and_checkpoints() -> None:
    now = [10.0]
    clock = MilestoneClock(10.0, clock=lambda: now[0])
    now[0] = 11.0
    clock.on_line("***** Running training *****")
    now[0] = 12.0
    clock.poll(steps_done=1, eval_loss=None, checkpoints=[])
    now[0] = 13.0
    clock.poll(steps_done=1, eval_loss=2.5, checkpoints=["checkpoint-1"])
    assert {k: v["time_s"] for k, v in clock.seen.items()} == {"load": 1.0, "longest_batch": 2.0,
        "optimizer_step": 2.0, "eval": 3.0, "save": 3.0}  # fmt: skip
    assert clock.seen["save"]["step"] == 1


def test_recorded_vram_at_the_first_step_and_the_first_eval(tmp_path: Path) -> None:
    log = tmp_path / "trainer_log.jsonl"
    lines = [{"current_steps": 1, "loss": 2.0, "vram_allocated": 7.5, "vram_reserved": 9.0},
             {"current_steps": 2, "loss": 1.9, "vram_allocated": 7.6, "vram_reserved": 9.1},
             {"current_steps": 2, "eval_loss": 1.8, "vram_allocated": 8.2, "vram_reserved": 10.0}]  # fmt: skip
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert read_vram(log) == {
        "train": {"allocated": 7.5, "reserved": 9.0},
        "eval": {"allocated": 8.2, "reserved": 10.0},
    }


def test_run_trial_probe_records_milestones(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    config = _config(tmp_path, data)
    result = run_trial(config, steps=1, out_dir=tmp_path / "trial", probe=True, probe_lengths=words,
                       launcher=f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}",
                       source=FakeGpuSource.unavailable("no NVIDIA GPU (test)"), interval_s=0.05)  # fmt: skip
    files = TrialFolder(result.folder)
    ran = yaml.safe_load(files.config.read_text())
    assert ran["dataset"] == TRAIN_NAME and ran["dataset_dir"] == str(files.probe_data)
    assert ran["disable_shuffling"] is True and ran["max_steps"] == 1
    record = json.loads(files.result.read_text())
    assert record["ok"] and record["probe_passed"] is True
    assert [m["name"] for m in record["milestones"] if m["passed"]] == ["load", "longest_batch",
        "optimizer_step", "eval", "save"]  # fmt: skip
    assert record["probe"]["micro_batch"] == 2 and record["probe"]["eval_batch"] == 3
    assert (
        "calibration_error" in record
    )  # the fake's model "tiny" has no config.json: no calibration, no crash


def test_trial_folder_names() -> None:
    folder = TrialFolder.at("/t/run")
    assert folder.result == Path("/t/run/result.json") and folder.trainer_log == Path(
        "/t/run/output/trainer_log.jsonl"
    )
    assert folder.probe_data.name == "probe-data" and folder.calibration.name == "calibration.json"
