"""Multi-rank logs (facts/ranks.py): the first rank that failed, and whether the others ran out too or were
torn down; a folder of per-node logs read as one run."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor import records
from oomdoctor.facts import log as log_module
from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.ranks import rank_findings, rank_report, read_run_log
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

LOGS = Path(__file__).resolve().parents[1] / "cases" / "logs"

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.76 GiB. GPU {gpu} has a total capacity of "
    "39.38 GiB of which 1.15 GiB is free. Including non-PyTorch memory, this process has 38.22 GiB memory in use. "
    "Of the allocated memory 35.10 GiB is allocated by PyTorch, and 2.40 GiB is reserved by PyTorch but unallocated."
)
# The shape torchrun prints when one rank fails: its traceback, NCCL aborting the others, the agent sending
# SIGTERM, then ChildFailedError with the root cause (as in the LLaMA-Factory multi-GPU threads of the sets).
TORN_DOWN = f"""\
[rank3]: Traceback (most recent call last):
[rank3]:   File "/site-packages/transformers/trainer.py", line 3675, in training_step
[rank3]:     loss = self.compute_loss(model, inputs)
[rank3]: {OOM.format(gpu=3)}
[rank1]:[E1201 10:00:01.000 ProcessGroupNCCL.cpp:1484] [PG 0 Rank 1] Process group watchdog thread terminated with exception
[rank0]:[E1201 10:00:01.000 ProcessGroupNCCL.cpp:1484] [PG 0 Rank 0] Process group watchdog thread terminated with exception
W1201 10:00:02.000 123 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4711 closing signal SIGTERM
W1201 10:00:02.000 123 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4712 closing signal SIGTERM
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  time      : 2024-12-01_10:00:02
  host      : gpu-node-7
  rank      : 3 (local_rank: 3)
  exitcode  : 1 (pid: 4713)
"""


def test_the_first_rank_and_the_siblings_torn_down() -> None:
    r = rank_report(TORN_DOWN)
    assert r is not None and r.first == "rank3" and r.oomed == ("rank3",)
    assert set(r.torn_down) == {"rank0", "rank1"} and not r.same_cause
    assert r.root_cause_rank == 3
    ids = [fid for fid, _ in rank_findings(r)]
    assert ids == ["ranks_first", "ranks_torn_down"]


def test_every_rank_ran_out_is_the_same_cause() -> None:
    # tests/cases/logs/ddp_two_ranks_rank1_first_long_sample.log: rank 1's message comes before rank 0's
    r = rank_report((LOGS / "ddp_two_ranks_rank1_first_long_sample.log").read_text(encoding="utf-8"))
    assert r is not None and r.first == "rank1" and r.oomed == ("rank1", "rank0") and r.same_cause


def test_one_process_is_no_rank_report() -> None:
    assert rank_report(OOM.format(gpu=0)) is None


def test_the_diagnosis_names_the_first_rank_and_its_phase() -> None:
    log = parse_log_text(TORN_DOWN)
    assert log.rank == 3 and log.phase == "first_batch"
    d = diagnose(facts_of(log=log))
    texts = " | ".join(f.text["en"] for f in d.findings)
    assert "rank3 ran out of memory first" in texts and "torn down" in texts


def test_a_folder_of_per_node_logs_is_one_run(tmp_path: Path) -> None:
    (tmp_path / "node0.log").write_text(
        "[rank0]: {'loss': 1.9, 'epoch': 0.1}\n[rank0]: Received SIGTERM, shutting down\n", encoding="utf-8"
    )
    (tmp_path / "node1.log").write_text(
        "[rank8]: Traceback (most recent call last):\n"
        '[rank8]:   File "/site-packages/transformers/trainer.py", line 3675, in training_step\n'
        "[rank8]:     loss = self.compute_loss(model, inputs)\n"
        f"[rank8]: {OOM.format(gpu=0)}\n",
        encoding="utf-8",
    )
    log = read_run_log(tmp_path)
    assert log.oom and log.rank == 8
    assert log.ranks.first == "node1/rank8" and log.ranks.torn_down == ("node0/rank0",)


def _big_run(oom_early: bool) -> str:
    """Two ranks' per-step lines past the size the report reads whole, with rank 3's failure either among the
    last lines or thousands of lines before them."""
    steps = "".join(f"[rank{r}]: {{'loss': 1.{i % 97:02d}, 'grad_norm': 0.5, 'epoch': 0.{i}}}\n"
                    for i in range(12_000) for r in (0, 1))  # fmt: skip
    failure, teardown = TORN_DOWN.split("[rank1]:[E1201", 1)
    if oom_early:
        return failure + steps + "[rank1]:[E1201" + teardown
    return steps + TORN_DOWN


def test_a_big_log_gives_the_report_its_whole_text_gives(monkeypatch) -> None:
    import oomdoctor.facts.ranks as ranks

    for oom_early in (False, True):
        text = _big_run(oom_early)
        assert len(text) > ranks.WHOLE_TEXT_CHARS
        fast = rank_report(text)
        monkeypatch.setattr(ranks, "WHOLE_TEXT_CHARS", len(text) + 1)
        whole = rank_report(text)
        monkeypatch.undo()
        assert fast is not None and whole is not None
        assert (fast.first, fast.oomed, set(fast.torn_down), fast.root_cause_rank) == (
            whole.first, whole.oomed, set(whole.torn_down), whole.root_cause_rank,
        )  # fmt: skip
        assert fast.first == "rank3" and fast.root_cause_rank == 3


def test_a_log_file_with_a_wrapped_message_is_read_reassembled(tmp_path: Path) -> None:
    # the message of the two-rank CPU test, hard-wrapped at 80 columns as a terminal copy leaves it
    message = OOM.format(gpu=0)
    path = tmp_path / "wrapped.log"
    path.write_text(
        "\n".join(message[i : i + 80] for i in range(0, len(message), 80)) + "\n", encoding="utf-8"
    )
    log = read_run_log(path)
    assert log.capacity_mib == 39.38 * 1024 and log.allocated_mib == 35.10 * 1024
    assert log.reserved_unallocated_mib == 2.40 * 1024 and log.path == str(path)


def test_a_small_messy_log_is_scanned_once_as_its_reassembled_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's bars end in "\\r", so reassembly changes its text: the facts are those of that text, and the
    windowed scan of the file, whose facts would be thrown away, is not run (one scan, not two)."""
    demo = Path(__file__).resolve().parents[2] / "configs" / "demo" / "train.log"
    expected = parse_log_text(demo.read_bytes().decode("utf-8"), path=str(demo))
    windowed: list[Path] = []
    real_scan = log_module._scan_file
    monkeypatch.setattr(log_module, "_scan_file", lambda *a, **k: windowed.append(a[0]) or real_scan(*a, **k))
    log = read_run_log(demo)
    assert not windowed
    assert log.bytes_read == demo.stat().st_size and log.encoding == "utf-8"
    assert records.replace(log, bytes_read=expected.bytes_read, encoding=None) == expected
    clean = tmp_path / "clean.log"  # no "\\r", nothing wrapped: the windowed scan reads it, once
    clean.write_text(OOM.format(gpu=0) + "\n", encoding="utf-8")
    assert read_run_log(clean).capacity_mib == 39.38 * 1024 and windowed == [clean]
