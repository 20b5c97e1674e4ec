"""The demo log (configs/demo/train.log): the course run must read as a long sample at step 30."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor.facts.log import read_log

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo" / "train.log"


def test_demo_log_is_the_course_run_dying_at_step_30() -> None:
    f = read_log(DEMO)
    assert (f.oom, f.oom_kind, f.ran_out_of, f.error_type) == (
        True,
        "cuda_oom",
        "gpu",
        "torch.OutOfMemoryError",
    )
    assert (f.phase, f.phase_confidence, f.step, f.good_steps, f.total_steps) == (
        "long_sample",
        "high",
        30,
        29,
        50,
    )
    assert f.frames[-1] == "cross_entropy"
    # 2.17 GiB is the fp32 logits of the batch with the longest sample: 4 x 958 x 151,936 x 4 bytes
    assert f.requested_mib == pytest.approx(4 * 958 * 151_936 * 4 / 1024**2, rel=0.01)
    assert f.requested_mib == pytest.approx(2222, abs=1)
    assert (f.capacity_mib, f.free_mib) == (pytest.approx(31.74 * 1024), pytest.approx(1.32 * 1024))
    assert (f.allocated_mib, f.reserved_unallocated_mib) == (
        pytest.approx(26.02 * 1024),
        pytest.approx(3.87 * 1024),
    )
    assert (f.instantaneous_batch_size, f.gradient_accumulation_steps, f.total_train_batch_size) == (4, 8, 32)
    assert (f.num_examples, f.world_size, f.gradient_checkpointing_logged) == (1600, 1, True)
    assert f.trainable_params == 5_046_272 and f.last_loss is not None


def test_demo_log_is_a_realistic_console_capture() -> None:
    raw = DEMO.read_bytes()
    lines = raw.count(b"\n")
    assert 150 <= lines <= 250
    text = raw.decode("utf-8")
    assert "\r" in text  # tqdm redraws, as a terminal capture has them
    assert "[INFO|trainer.py:" in text and "llamafactory.model.loader" in text
    assert text.count("{'loss': '") == 5  # logging every 5 steps, transformers 5.x string values
