"""The warning engine over recorded frames (tests/watch/cases/*.yaml), with the real estimator and rules; the
watcher's own reading of a scripted GPU; the followers and the schedule."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.model import model_from_name
from oomdoctor.facts.types import DataFacts, GpuDevice, GpuFacts, GpuProcess
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.facts import Facts
from oomdoctor.watch import Observation, Pool, WarningEngine, schedule
from oomdoctor.watch.advice import load_spec, make_advise, make_plan
from oomdoctor.watch.engine import CHECKS
from oomdoctor.watch.follow import LogFollower, Progress, TrainerLogFollower

CASES = sorted((Path(__file__).resolve().parents[1] / "watch" / "cases").glob("*.yaml"))


def _facts(case: dict[str, Any]) -> Facts:
    config = config_from_mapping(case["config"], world_size=case.get("world_size"))
    model = model_from_name(config.model_name_or_path)
    data = DataFacts(source="given", **case["lengths"]) if "lengths" in case else None
    card = case.get("card")
    total = card["total_mib"] if card else None
    gpu = GpuFacts(available=bool(card), devices=[GpuDevice(0, card["name"], total)] if card else [])
    return facts_of(config=config, model=model, data=data, gpu=gpu, capacity_mib=total)


def _observation(frame: dict[str, Any], card: dict[str, Any] | None) -> Observation:
    pools = []
    if card and "gpu" in frame:
        g = frame["gpu"]
        others = tuple(tuple(o) for o in g.get("others", []))
        pools.append(Pool("gpu0", "gpu", "card", card["total_mib"], g["used"], g["run"], 0, others))  # type: ignore[arg-type]
    host = frame.get("host", {"source": "host", "limit": 65536, "used": 8000})
    pools.append(Pool("host", "host", host["source"], host["limit"], host["used"]))
    return Observation(frame["t"], tuple(pools), frame.get("step"), frame.get("total"), frame.get("eta"),
                       training_started=True, retries=frame.get("retries", 0))  # fmt: skip


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_recorded_frames_give_the_expected_warnings(path: Path) -> None:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    facts = _facts(case)
    plan = make_plan(facts, on_gpu=bool(case.get("card")))
    assert plan is not None
    engine = WarningEngine(plan, load_spec(), make_advise(facts))
    for frame in case["frames"]:
        engine.observe(_observation(frame, case.get("card")))
    expect = case["expect"]
    assert [w.kind for w in engine.history] == expect["kinds"], [w.text["en"] for w in engine.history]
    if not expect["kinds"]:
        return
    first = engine.history[0]
    if "expected_step" in expect:
        assert first.expected_step == expect["expected_step"]
    assert first.rule is not None and first.rule.startswith(expect["rule_prefix"]), first.rule
    assert first.changes or first.env or first.act["en"]
    for lang in ("en", "zh"):
        assert "{" not in first.text[lang] and "{" not in first.act[lang]
        assert first.rule in first.act[lang]


def test_every_kind_has_its_data_and_a_case() -> None:
    spec = load_spec()
    assert set(spec["kinds"]) == set(CHECKS)
    covered = {k for p in CASES for k in yaml.safe_load(p.read_text(encoding="utf-8"))["expect"]["kinds"]}
    assert covered == set(CHECKS)
    for kind in spec["kinds"].values():
        assert {"en", "zh"} <= set(kind["text"]) and {"en", "zh"} <= set(kind["act"])


def test_eval_warning_reads_like_the_course_example() -> None:
    case = yaml.safe_load((CASES[0].parent / "eval_batch_32_on_24g.yaml").read_text(encoding="utf-8"))
    facts = _facts(case)
    engine = WarningEngine(make_plan(facts, on_gpu=True), load_spec(), make_advise(facts))  # type: ignore[arg-type]
    [warning] = engine.observe(_observation(case["frames"][0], case["card"]))
    assert warning.text["en"].startswith("Validation at step 50 with eval batch 32")
    assert "GiB left on GPU 0: likely to run out there." in warning.text["en"]
    assert warning.needed_mib is not None and warning.left_mib is not None
    assert warning.needed_mib > warning.left_mib
    assert warning.changes["per_device_eval_batch_size"][0] == 32
    assert warning.to_json()["kind"] == "eval_needs_more"


def test_the_watcher_reads_the_run_and_a_newcomer_on_a_scripted_card(tmp_path: Path) -> None:
    """The watcher follows a real process (this one, by --pid) and its memory on a fake card."""
    from oomdoctor.watch import Watcher

    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"model_name_or_path": "Qwen/Qwen3-0.6B", "stage": "sft", "do_train": True,
                                      "dataset": "d", "max_steps": 100, "cutoff_len": 512,
                                      "per_device_train_batch_size": 1, "output_dir": str(tmp_path / "out")}))  # fmt: skip
    me = GpuProcess(pid=os.getpid(), used_mib=5000.0, name="python")
    card = GpuDevice(0, "NVIDIA GeForce RTX 4090", 24564.0, used_mib=5300.0, processes=[me])
    source = FakeGpuSource([card])
    watcher = Watcher(config, pid=os.getpid(), gpu_source=source)
    frame = watcher.poll()
    assert frame["alive"] and frame["pids"] == [os.getpid()] and frame["warnings"] == []
    gpu = frame["pools"][0]
    assert gpu["name"] == "gpu0" and gpu["run_mib"] == 5000.0 and gpu["left_mib"] == pytest.approx(19264.0)
    assert "phase_lines_mib" in gpu and frame["pools"][-1]["kind"] == "host"

    source._devices[0] = GpuDevice(0, card.name, 24564.0, used_mib=11300.0,
                                   processes=[me, GpuProcess(pid=4242, used_mib=6000.0, name="jupyter")])  # fmt: skip
    frame = watcher.poll()
    [warning] = frame["warnings"]
    assert warning["kind"] == "other_process" and "pid 4242 (jupyter)" in warning["text"]["en"]
    assert not frame["ended"]

    from oomdoctor.commands.watch import watch_run
    from oomdoctor.watch.render import render_run_frame

    en, zh = render_run_frame(frame, None, "en"), render_run_frame(frame, None, "zh")
    assert f"pid {os.getpid()}" in en and "next validation at step -" in en and "pid 4242 (jupyter)" in en
    assert "下次验证" in zh and "上出现了另一个进程" in zh and "First warning" not in zh
    out = io.StringIO()
    assert watch_run(watcher, str, once=True, as_json=True, out=out) == 0
    assert json.loads(out.getvalue())["history"][0]["kind"] == "other_process"


def test_followers_read_only_what_was_added(tmp_path: Path) -> None:
    log, jsonl = tmp_path / "train.log", tmp_path / "trainer_log.jsonl"
    progress = Progress()
    console, records = LogFollower(log, progress), TrainerLogFollower(jsonl, progress)
    log.write_text(
        "Running tokenizer on dataset: 100%|#| 16/16 [00:00<00:00]\n  Total optimization steps = 8\n"
    )
    console.poll()
    assert progress.step is None and progress.total_steps == 8  # a tokenizer bar is not training progress
    with open(log, "a") as fh:
        fh.write(
            "***** Running training *****\n 25%|##  | 2/8 [00:02<00:06,  1.0it/s]\r 38%|### | 3/8 [00:03<00:0"
        )
    console.poll()
    assert progress.step == 2 and progress.eta_s == 6.0  # the redraw cut mid-line waits for its end
    with open(log, "a") as fh:
        fh.write("5,  1.0it/s]\n|===| memory_stats: 'num_alloc_retries': 4\n***** Running Evaluation *****\n")
    console.poll()
    assert progress.step == 3 and progress.retries == 4 and progress.in_eval
    jsonl.write_text('{"current_steps": 4, "total_steps": 8, "loss": 2.5, "remaining_time": "0:01:02", '
                     '"vram_reserved": 1.5}\n')  # fmt: skip
    records.poll()
    assert progress.step == 4 and progress.loss == 2.5 and progress.eta_s == 62.0
    assert progress.vram_reserved_mib == 1536.0 and not progress.in_eval
    assert console.file.bytes_read == log.stat().st_size


def test_schedule_of_validations_and_saves() -> None:
    base = {"model_name_or_path": "m", "dataset": "d", "eval_dataset": "e", "eval_strategy": "steps"}
    config = config_from_mapping({**base, "eval_steps": 50, "save_steps": 200, "max_steps": 500})
    assert schedule.next_eval(config, None, 500) == 50 and schedule.next_eval(config, 50, 500) == 100
    assert schedule.next_save(config, 10, 500) == 200 and schedule.next_save(config, 450, 500) is None
    ratio = config_from_mapping({**base, "eval_steps": 0.1, "max_steps": 300})
    assert schedule.next_eval(ratio, 0, 300) == 30
    no_save = config_from_mapping({**base, "eval_steps": 5, "save_strategy": "no", "max_steps": 10})
    assert schedule.next_save(no_save, 0, 10) is None


def test_the_watch_package_stays_headless() -> None:
    import subprocess
    import sys

    code = ("import sys, oomdoctor.watch, oomdoctor.commands.watch; "
            "print([m for m in ('textual', 'torch', 'transformers', 'llamafactory') if m in sys.modules])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_save_line_is_drawn_only_while_a_save_is_coming(tmp_path: Path) -> None:
    """A LoRA run on a scripted card: the save adds nothing on the GPU (the line sits on what the run holds) and
    the adapter in host RAM; past the last save there is no save line."""
    from oomdoctor.watch import Watcher

    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({"model_name_or_path": "Qwen/Qwen3-0.6B", "stage": "sft", "do_train": True,
                                      "dataset": "d", "max_steps": 100, "save_steps": 40, "cutoff_len": 512,
                                      "output_dir": str(tmp_path / "out")}))  # fmt: skip
    me = GpuProcess(pid=os.getpid(), used_mib=3000.0, name="python")
    source = FakeGpuSource(
        [GpuDevice(0, "NVIDIA GeForce RTX 4090", 24564.0, used_mib=3300.0, processes=[me])]
    )
    watcher = Watcher(config, pid=os.getpid(), gpu_source=source)
    frame = watcher.poll()
    gpu, host = frame["pools"][0], frame["pools"][-1]
    lines = gpu["phase_lines_mib"]
    assert frame["next_save_step"] == 40 and lines["save"] < lines["longest_batch"]
    assert lines["save"] == pytest.approx(lines["longest_batch"] - watcher.plan.train_extra_mib, abs=0.2)  # type: ignore[operator]
    adapter = sum(watcher.plan.save_host_parts.values())
    assert adapter > 0 and host["phase_lines_mib"]["save"] == pytest.approx(
        host["limit_mib"] - host["left_mib"] + adapter, abs=0.3
    )
    watcher.progress.step = 85  # past the last save (80): the line goes
    assert "save" not in watcher.poll()["pools"][0]["phase_lines_mib"]
