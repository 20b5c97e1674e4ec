"""A run whose process we cannot see: followed when its log is still being written (real files, mtimes set
with os.utime), and the watcher working from the log alone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import GpuDevice
from oomdoctor.watch import Watcher, run_is_live
from oomdoctor.watch.logstate import log_is_live, log_state, stale_s

RUNNING = (
    "***** Running training *****\n  Total optimization steps = 40\n 10%|#  | 4/40 [00:08<01:12,  2.0s/it]\n"
)
OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of "
       "31.73 GiB of which 1.20 GiB is free.\n")  # fmt: skip


def _aged(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def _config(tmp_path: Path, **extra: object) -> Path:
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"model_name_or_path": "Qwen/Qwen3-0.6B", "stage": "sft", "do_train": True,
                                      "dataset": "d", "max_steps": 40, "save_steps": 20, "cutoff_len": 512,
                                      "output_dir": str(tmp_path / "out"), **extra}))  # fmt: skip
    (tmp_path / "out").mkdir()
    return config


def test_a_log_written_lately_without_an_end_is_live(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(RUNNING)
    assert log_is_live(log, None)
    assert not log_is_live(_aged(log, 120), None)  # not written for two minutes
    for end in ("Training completed. Do not forget to share your model on huggingface.co/models =)\n",
                "{'train_runtime': 81.2, 'train_samples_per_second': 3.9, 'train_loss': 1.52}\n", OOM):  # fmt: skip
        log.write_text(RUNNING + end)
        assert not log_is_live(log, None), end
    assert not log_is_live(tmp_path / "absent.log", None) and not log_is_live(None, tmp_path)


def test_trainer_log_jsonl_alone_counts_until_its_last_step(tmp_path: Path) -> None:
    jsonl = tmp_path / "trainer_log.jsonl"
    jsonl.write_text('{"current_steps": 5, "total_steps": 40, "loss": 2.1}\n')
    assert log_is_live(None, tmp_path)
    jsonl.write_text('{"current_steps": 5, "total_steps": 40}\n{"current_steps": 40, "total_steps": 40}\n')
    assert not log_is_live(None, tmp_path)


def test_an_old_log_is_not_read(tmp_path: Path) -> None:
    log = tmp_path / "nohup.out"
    log.write_text(RUNNING + OOM)
    _aged(log, 3600)
    state = log_state([log], None, within_s=60)
    assert state.age_s is not None and state.age_s > 3000 and not state.ended  # the tail was never read


def test_the_tui_decision_without_any_process(tmp_path: Path) -> None:
    config = _config(tmp_path)
    log = tmp_path / "out" / "running_log.txt"
    assert not run_is_live(config)  # nothing names it, no log yet
    log.write_text(RUNNING)
    assert run_is_live(config) and run_is_live(config, log)  # found in output_dir, or given
    _aged(log, 90)
    assert not run_is_live(config)


def test_the_watcher_follows_the_log_alone_and_diagnoses_its_end(tmp_path: Path) -> None:
    config = _config(tmp_path, do_eval=True, eval_dataset="e", eval_strategy="steps", eval_steps=10)
    log = tmp_path / "out" / "running_log.txt"
    log.write_text(RUNNING)
    card = GpuDevice(0, "Tesla V100-SXM2-32GB", 32768.0, used_mib=0.0, processes=[])
    watcher = Watcher(config, gpu_source=FakeGpuSource([card]))
    frame = watcher.poll()
    assert frame["alive"] and frame["log_only"] and frame["pids"] == [] and frame["step"] == 4
    assert frame["eta_s"] == 72.0 and frame["next_eval_step"] == 10 and frame["next_save_step"] == 20
    [estimate] = frame["pools"]  # no process memory: the estimate's levels against the card
    assert (
        estimate["kind"] == "estimate" and estimate["used_mib"] is None and estimate["limit_mib"] == 32768.0
    )
    assert set(estimate["phase_lines_mib"]) == {"eval", "longest_batch", "save"}
    from oomdoctor.watch.render import render_run_frame

    en = render_run_frame(frame, None, "en")
    assert "following its log alone" in en and "No warning can be judged" in en and "pid -" in en
    assert "仅跟随它的日志" in render_run_frame(frame, None, "zh")

    # RECORD_VRAM in trainer_log.jsonl: the card as the log tells it, and the warnings judge it
    (tmp_path / "out" / "trainer_log.jsonl").write_text(
        '{"current_steps": 5, "total_steps": 40, "loss": 2.0, "vram_reserved": 31.5}\n')  # fmt: skip
    frame = watcher.poll()
    [pool] = frame["pools"]
    assert pool["limit_source"] == "log" and pool["used_mib"] > 32000 and frame["step"] == 5
    assert "near_limit" in {w["kind"] for w in frame["warnings"]}

    with open(log, "a") as fh:
        fh.write(OOM)
    frame = watcher.poll()
    assert frame["ended"] and not frame["alive"] and watcher.final is not None and watcher.final.oom
    assert frame["history"] and frame["history"][0]["kind"] == "near_limit"


def test_a_log_that_goes_quiet_ends_the_watch(tmp_path: Path) -> None:
    config = _config(tmp_path)
    log = tmp_path / "out" / "running_log.txt"
    log.write_text(RUNNING)
    watcher = Watcher(config, gpu_source=FakeGpuSource([]))
    assert watcher.poll()["log_only"]
    _aged(log, stale_s() - 30)  # quiet, but not for long: still followed (beyond the 60 s that starts it)
    assert watcher.poll()["alive"]
    _aged(log, stale_s() + 30)
    frame = watcher.poll()
    assert frame["ended"] and frame["diagnosis"] is not None


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_waiting_is_unchanged_for_an_old_log(tmp_path: Path, lang: str) -> None:
    from oomdoctor.watch.render import render_run_frame

    config = _config(tmp_path)
    (tmp_path / "out" / "running_log.txt").write_text(RUNNING)
    _aged(tmp_path / "out" / "running_log.txt", 300)
    frame = Watcher(config, gpu_source=FakeGpuSource([])).poll()
    assert not frame["alive"] and not frame["log_only"] and not frame["ended"]
    assert render_run_frame(frame, None, lang)  # the waiting frame renders
