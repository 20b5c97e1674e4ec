"""The CPU side of benchmarks/gpu_check.py: arguments, the length schedule, the estimate it compares with."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_defaults_replay_the_course_pair(gpu_check) -> None:
    args = gpu_check.parse_args([])
    assert args.batch_sizes == [4, 2]
    assert (args.longest, args.eval_longest, args.eval_batch, args.effective_batch) == (957, 604, 8, 32)
    assert args.cap_gib == 32.0 and not args.dry_run


def test_batches_must_keep_the_effective_batch(gpu_check) -> None:
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--batches", "3"])
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--batches", "four"])
    assert gpu_check.parse_args(["--batches", "8,1"]).batch_sizes == [8, 1]


def test_length_schedule_holds_the_longest_sample_once_and_varies(gpu_check) -> None:
    schedule = gpu_check.length_schedule(4, 24, 957, seed=0)
    flat = [n for batch in schedule for n in batch]
    assert len(schedule) == 24 and all(len(batch) == 4 for batch in schedule)
    assert max(flat) == 957 and flat.count(957) == 1
    assert 957 in schedule[3]
    assert len({gpu_check.padded(max(batch)) for batch in schedule}) > 5  # the allocator sees many shapes
    assert schedule == gpu_check.length_schedule(4, 24, 957, seed=0)  # deterministic


def test_padding_rounds_up_to_8(gpu_check) -> None:
    assert [gpu_check.padded(n) for n in (1, 8, 957, 604)] == [8, 8, 960, 608]


def test_estimate_side_matches_the_course_figures(gpu_check) -> None:
    args = gpu_check.parse_args(["--dry-run"])
    est = gpu_check.estimate_side(args, 4)
    assert est["padded_len"] == 960 and est["eval_len"] == 608
    assert est["phases"]["train"] == pytest.approx(8100, rel=0.15)
    assert est["dominant_term"] == "logits_loss"
    assert gpu_check.estimate_side(args, 2)["micro_batch"] == 2


def test_compare_puts_like_next_to_like(gpu_check) -> None:
    args = gpu_check.parse_args([])
    est = gpu_check.estimate_side(args, 4)
    measured = {
        "phases": {
            "load": {"max_allocated_mib": 1500.0},
            "train": {"max_allocated_mib": 8000.0},
            "eval": {"max_allocated_mib": 8300.0},
        },
        "nvml_peak_used_mib": 28588.0,
    }
    rows = gpu_check.compare(measured, est)
    kinds = [row["what"] for row in rows]
    assert kinds == [
        "load: max allocated",
        "train: max allocated",
        "eval: max allocated",
        "nvidia-smi peak vs band",
    ]
    assert rows[1]["error"] == pytest.approx(est["phases"]["train"] / 8000.0 - 1.0)
    assert rows[3]["inside"] is True


def test_dry_run_needs_no_gpu(gpu_check, capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_check.main(["--dry-run", "--batches", "4"]) == 0
    out = capsys.readouterr().out
    assert "estimate b4" in out and "logits_loss" in out


def test_out_folder_from_argument_or_OUT(gpu_check, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert gpu_check.out_dir(gpu_check.parse_args(["--out", str(tmp_path / "a")])) == tmp_path / "a"
    monkeypatch.setenv("OUT", str(tmp_path / "b"))
    assert gpu_check.out_dir(gpu_check.parse_args([])) == tmp_path / "b"
