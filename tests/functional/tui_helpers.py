"""Helpers for driving the TUI with Pilot: a user's folder with a real config, hand-built diagnoses (real
dataclasses from the core's contract), a scripted GPU, a fixed clock, and a trial launcher that writes a
trial folder the way ``oomdoctor.trial.run_trial`` does without starting a process.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from oomdoctor.diagnosis import Answer, Diagnosis, EstimatedEffect, Finding, Proposal, Question
from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import GpuDevice, GpuProcess, LogFacts, ModelFacts

CONFIG_TEXT = """\
### model
model_name_or_path: Qwen/Qwen3-0.6B

### method
stage: sft
do_train: true
finetuning_type: lora
lora_target: all

### dataset
dataset: keywords_clean
template: qwen3_nothink
cutoff_len: 2048

### output
output_dir: saves/qwen3-0.6b/lora/sft

### train
per_device_train_batch_size: 4  # the course's first try
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
bf16: true

### eval
val_size: 0.1
eval_strategy: steps
eval_steps: 100
"""

OOM_LOG_TEXT = """\
[INFO|trainer.py:2519] >> ***** Running training *****
[INFO|trainer.py:2520] >>   Num examples = 1,600
[INFO|trainer.py:2523] >>   Instantaneous batch size per device = 4
[INFO|trainer.py:2526] >>   Total train batch size (w. parallel, distributed & accumulation) = 32
[INFO|trainer.py:2527] >>   Gradient Accumulation steps = 8
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total capacity of 31.73 GiB of which 1.20 GiB is free.
"""

V100 = GpuDevice(
    index=0,
    name="Tesla V100-SXM2-32GB",
    total_mib=32768.0,
    used_mib=512.0,
    compute_capability=(7, 0),
    bf16_supported=False,
    processes=[GpuProcess(pid=4242, used_mib=512.0, name="python")],
)


def fixed_clock() -> float:
    return 1000.0


def screen_text(app: Any) -> str:
    """The screen as plain text (what a user reads), for assertions that do not need a snapshot."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system=None,
                      record=True, legacy_windows=False, safe_box=False)  # fmt: skip
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def make_facts(config_path: Path, gpu_source: FakeGpuSource, *, phase: str = "first_batch") -> Any:
    """Facts as ``api.gather`` builds them: the real config reader and GPU facade, a hand-built log."""
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.gpu import read_gpu
    from oomdoctor.rules.assemble import facts_of

    log = LogFacts(
        path="qwen3_lora.log",
        oom=True,
        oom_kind="cuda_oom",
        phase=phase,
        step=1 if phase == "first_batch" else None,
        total_steps=150,
        requested_mib=2375.7,
        capacity_mib=32491.5,
        free_mib=1228.8,
        reserved_unallocated_mib=310.0,
        training_started=phase != "unknown",
    )
    model = ModelFacts(name="Qwen/Qwen3-0.6B", source="table:qwen3-0.6b", hidden_size=1024, num_layers=28,
                       vocab_size=151936, params=596_049_920)  # fmt: skip
    estimate = Estimate(
        peak_allocated_mib=35120.0,
        expected_nvidia_smi_mib=(36100.0, 38400.0),
        phases={"load": 1200.0, "train": 35120.0, "eval": 30200.0},
        terms={
            "weights": 1137.0,
            "trainable_state": 160.0,
            "activations": 900.0,
            "logits_loss": 32000.0,
            "eval": 30200.0,
            "overhead": 923.0,
        },  # fmt: skip
        dominant_term="logits_loss",
        padded_len=2048,
        padded_len_source="cutoff_len",
        micro_batch=4,
        eval_batch=8,
        gpu_total_mib=32768.0,
        fits=False,
        headroom_mib=-5632.0,
    )
    return facts_of(
        config=read_config(config_path),
        log=log,
        gpu=read_gpu(gpu_source),
        model=model,
        estimate=estimate,
        capacity_mib=32491.5,
    )


def halve_batch_proposal() -> Proposal:
    return Proposal(
        rule="first_batch.halve_micro_batch",
        title={
            "en": "First batch ran out: halve the micro-batch, double accumulation",
            "zh": "第一批就显存不足:单卡 batch 减半,梯度累积加倍",
        },  # fmt: skip
        changes={"per_device_train_batch_size": [4, 2], "gradient_accumulation_steps": [8, 16]},
        why={
            "en": "Logits and activations grow with the micro-batch; the effective batch stays 32.",
            "zh": "logits 和激活值随单卡 batch 增长;有效 batch 仍为 32。",
        },  # fmt: skip
        cost={
            "en": "Twice the micro-batches per update: slower (the course measured 300 s -> 560 s).",
            "zh": "每次更新的微批次翻倍:更慢(课程实测 300 秒 -> 560 秒)。",
        },  # fmt: skip
        judge={
            "en": "The failing step passes; Total train batch size stays 32.",
            "zh": "原来失败的一步能通过;Total train batch size 仍为 32。",
        },  # fmt: skip
        cause="logits",
        already_on=[{"en": "gradient checkpointing (on by default)", "zh": "梯度检查点(默认开启)"}],
        effect=EstimatedEffect(before_mib=35120.0, after_mib=18400.0, fits_after=True),
        next=["long_sample.check_lengths"],
    )


def eval_batch_proposal() -> Proposal:
    return Proposal(
        rule="eval.set_eval_batch",
        title={
            "en": "Set the eval batch (8 by default) to the train micro-batch",
            "zh": "把验证 batch(默认 8)设为训练的单卡 batch",
        },  # fmt: skip
        changes={"per_device_eval_batch_size": [None, 4]},
        why={
            "en": "Validation runs 8 samples at once unless told otherwise.",
            "zh": "未设置时验证一次跑 8 条样本。",
        },
        cost={"en": "Validation takes a little longer.", "zh": "验证稍慢。"},
        judge={"en": "The first validation passes.", "zh": "第一次验证能通过。"},
        cause="eval_batch",
    )


def make_diagnosis(*, questions: bool = False) -> Diagnosis:
    findings = [
        Finding(
            id="in_effect",
            text={
                "en": "Gradient checkpointing is already on (LLaMA-Factory's default).",
                "zh": "梯度检查点已开启(LLaMA-Factory 默认)。",
            },
        ),  # fmt: skip
        Finding(
            id="eval_default",
            text={
                "en": "per_device_eval_batch_size is not set: 8 by default.",
                "zh": "未设置 per_device_eval_batch_size:默认 8。",
            },
            severity="warning",
        ),  # fmt: skip
    ]
    if questions:
        from oomdoctor.rules.questions import builtin_question

        return Diagnosis(
            oom=True,
            phase="unknown",
            cause="unknown",
            requested_mib=2375.7,
            capacity_mib=32491.5,
            free_mib=1228.8,
            findings=findings,
            questions=[builtin_question("phase", "engine"), builtin_question("weights_loaded", "engine")],
        )
    return Diagnosis(
        oom=True,
        phase="first_batch",
        cause="logits",
        step=1,
        requested_mib=2375.7,
        capacity_mib=32491.5,
        free_mib=1228.8,
        reserved_unallocated_mib=310.0,
        findings=findings,
        proposal=halve_batch_proposal(),
        alternatives=[eval_batch_proposal()],
    )


def two_answer_question() -> Question:
    return Question(
        key="weights_loaded",
        text={"en": "Did the weights finish loading?", "zh": "权重加载完成了吗?"},
        answers=[Answer("yes", {"en": "Yes", "zh": "是"}), Answer("no", {"en": "No", "zh": "否"})],
        asked_by="engine",
    )


async def settle(app: Any, pilot: Any) -> None:
    """Let the workers finish and the screen catch up. A failed worker is not an error here: the app
    turns it into an error dialog, which is what a test then looks at."""
    from textual.worker import WorkerFailed

    with contextlib.suppress(WorkerFailed):
        await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


async def show_diagnosis(
    app: Any, pilot: Any, facts: Any, diagnosis: Diagnosis, config: Path, log: Path
) -> None:
    """Open ``config``/``log`` as the run on screen with a hand-built diagnosis (no file reading)."""
    from oomdoctor.tui.app import OomDoctorApp
    from oomdoctor.tui.screens import PickerScreen

    await app.workers.wait_for_complete()
    await pilot.pause()
    if isinstance(app.screen, PickerScreen):
        app.pop_screen()
    app.session.open_run(config, log)
    app.post_message(OomDoctorApp.RunLoaded(config, log, facts))
    app.post_message(OomDoctorApp.DiagnosisReady(facts, diagnosis))
    await pilot.pause()
    await pilot.pause()


async def apply_first_proposal(app: Any, pilot: Any, user_dir: Path, gpu_source: Any) -> None:
    """The course run on screen with its hand-built diagnosis, its proposal applied (a, then Enter on the
    folder dialog) and the patch written."""
    config = user_dir / "configs/qwen3_lora.yaml"
    await show_diagnosis(
        app, pilot, make_facts(config, gpu_source), make_diagnosis(), config, user_dir / "qwen3_lora.log"
    )
    await pilot.press("a")
    await pilot.pause()
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def apply_and_start_trial(app: Any, pilot: Any, user_dir: Path, gpu_source: Any) -> None:
    """``apply_first_proposal``, then the short trial of the new config started (t, Enter)."""
    await apply_first_proposal(app, pilot, user_dir, gpu_source)
    await pilot.press("t", "enter")
    await pilot.pause()


class ScriptedTrial:
    """A trial launcher with ``run_trial``'s signature: it writes the trial folder (config.yaml, train.log,
    gpu-samples.csv, result.json) and reports fixed samples, lines and progress, then waits for ``stop``
    when told to, so the live screen can be looked at and stopped."""

    def __init__(self, *, outcome: str = "oom", wait_for_stop: bool = False, hold_s: float = 30.0) -> None:
        self.outcome = outcome
        self.wait_for_stop = wait_for_stop
        self.hold_s = hold_s  # the longest it waits for stop
        self.started = threading.Event()
        self.calls: list[dict[str, Any]] = []

    def __call__(self, config_path: Path, *, steps: int, out_dir: Path, source: Any = None,
                 on_sample: Callable[[Any], None] | None = None, on_line: Callable[[str], None] | None = None,
                 on_progress: Callable[[Any], None] | None = None, stop: threading.Event | None = None,
                 cwd: Any = None, **_: Any) -> Any:  # fmt: skip
        from oomdoctor.trial.runner import TrialProgress, TrialResult
        from oomdoctor.trial.sampler import GpuReading, SampleSnapshot

        self.calls.append(
            {"config_path": Path(config_path), "steps": steps, "out_dir": Path(out_dir), "cwd": cwd}
        )
        folder = Path(out_dir)
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(Path(config_path).read_text(encoding="utf-8"), encoding="utf-8")
        change = Path(config_path).parent / "change.json"
        if change.is_file():
            (folder / "change.json").write_text(change.read_text(encoding="utf-8"), encoding="utf-8")
        lines = ["[INFO] ***** Running training *****", "  Instantaneous batch size per device = 2"]
        used = [1200.0, 9800.0, 17600.0, 18400.0, 18100.0]
        for i, mib in enumerate(used):
            snap = SampleSnapshot(
                time_s=0.2 * i,
                readings=(GpuReading("0", mib, 32768.0, 20.0 * i, 60.0 + 40 * i),),
                peaks_mib=(("0", max(used[: i + 1])),),
                source="nvml",
            )
            if on_sample:
                on_sample(snap)
        if on_progress:
            on_progress(
                TrialProgress(steps_done=3, total_steps=steps, elapsed_s=4.0, peak_mib=18400.0, loss=2.1)
            )
        if self.outcome == "oom":
            lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a "
                         "total capacity of 31.73 GiB of which 600.00 MiB is free.")  # fmt: skip
        for line in lines:
            if on_line:
                on_line(line)
        self.started.set()
        stopped = False
        if self.wait_for_stop and stop is not None:
            stopped = stop.wait(self.hold_s)
        (folder / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (folder / "gpu-samples.csv").write_text(
            "time_s,gpu,memory_used_mib,memory_total_mib,util_pct,power_w\n"
            + "".join(f"{0.2 * i:.3f},0,{mib:.1f},32768.0,,\n" for i, mib in enumerate(used)),
            encoding="utf-8",
        )
        outcome = "stopped" if stopped else self.outcome
        record = {
            "schema": 1,
            "outcome": outcome,
            "ok": outcome == "ok",
            "exit_code": 0 if outcome == "ok" else 1,
            "wall_s": 42.0,
            "peak_memory_mib": 18400.0,
            "peak_memory_mib_per_gpu": {"0": 18400.0},
            "oom": outcome == "oom",
            "phase": "first_batch" if outcome == "oom" else "none",
            "peak_source": "nvml",
            "steps_requested": steps,
            "source_config": str(Path(config_path).resolve()),
            "steps_done": 3,
        }
        (folder / "result.json").write_text(json.dumps(record), encoding="utf-8")
        return TrialResult(folder=folder, record=record)
