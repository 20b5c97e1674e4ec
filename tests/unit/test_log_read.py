"""read_log on files and folders: bad input, big files read from the tail, streaming, trainer_log.jsonl."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest

import oomdoctor.facts.log as log_module
from oomdoctor.errors import BadInput
from oomdoctor.facts.log import parse_log_text, read_log

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.17 GiB. GPU 0 has a total capacity of "
    "31.74 GiB of which 1.32 GiB is free. Including non-PyTorch memory, this process has 30.41 GiB memory in use. "
    "Of the allocated memory 26.02 GiB is allocated by PyTorch, and 3.87 GiB is reserved by PyTorch but unallocated."
)
BANNER = [
    "[INFO|2026-11-12 14:03:09] llamafactory.hparams.parser:523 >> Process rank: 0, world size: 1, device: cuda:0",
    "[INFO|trainer.py:1469] 2026-11-12 14:03:18,812 >> ***** Running training *****",
    "[INFO|trainer.py:1473] 2026-11-12 14:03:18,812 >>   Instantaneous batch size per device = 4",
    "[INFO|trainer.py:1478] 2026-11-12 14:03:18,812 >>   Total optimization steps = 5000",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/env/site-packages/transformers/trainer.py", line 1909, in training_step',
    "    loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)",
    '  File "/env/site-packages/torch/nn/functional.py", line 3561, in cross_entropy',
    "    return torch._C._nn.cross_entropy_loss(",
    OOM,
]


def big_log(path: Path, steps: int) -> Path:
    """A long training log: banner, many progress redraws and loss lines, then the failure."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(BANNER) + "\n")
        for n in range(1, steps + 1):
            fh.write(f"\r {n * 100 // 5000:2d}%|█         | {n}/5000 [00:10<00:50,  6.02s/it]")
            if n % 5 == 0:
                fh.write(
                    f"\r{' ' * 40}\r{{'loss': '{1 + 1 / n:.4f}', 'learning_rate': '5e-05', 'epoch': '{n / 5000:.3f}'}}\n"
                )
        fh.write("\n".join(TRACEBACK) + "\n")
    return path


@pytest.mark.parametrize(
    ("content", "key"),
    [(b"", "is empty"), (b"  \n\n\t\n", "is empty"), (b"PK\x03\x04\x14\x00\x00\x00binary", "binary")],
)
def test_bad_files_are_one_line_bilingual_errors(tmp_path: Path, content: bytes, key: str) -> None:
    p = tmp_path / "train.log"
    p.write_bytes(content)
    with pytest.raises(BadInput) as err:
        read_log(p)
    message = str(err.value)
    assert key in message and "\n" not in message and " / " in message  # en / zh


def test_missing_file_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not found"):
        read_log(tmp_path / "nope.log")
    with pytest.raises(BadInput, match="no training log"):
        read_log(tmp_path)


def test_reading_never_changes_the_file(tmp_path: Path) -> None:
    p = tmp_path / "train.log"
    p.write_text("\n".join(BANNER + TRACEBACK) + "\n", encoding="utf-8")
    before = (p.read_bytes(), p.stat().st_mtime_ns)
    read_log(p)
    assert (p.read_bytes(), p.stat().st_mtime_ns) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["train.log"]


def test_big_log_reads_head_and_tail_only(tmp_path: Path) -> None:
    p = big_log(tmp_path / "nohup.out", steps=3000)
    size = p.stat().st_size
    whole = read_log(p)
    tail = read_log(p, tail_bytes=16 * 1024)
    assert not whole.truncated_read and whole.bytes_read == size
    assert tail.truncated_read and tail.bytes_read < size
    for f in (whole, tail):
        assert (f.oom, f.phase, f.good_steps, f.step) == (True, "long_sample", 3000, 3001)
        assert (f.instantaneous_batch_size, f.total_steps, f.world_size) == (
            4,
            5000,
            1,
        )  # banner from the head


def test_streamed_full_scan_matches_the_whole_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = big_log(tmp_path / "train.log", steps=400)
    whole = read_log(p)
    monkeypatch.setattr(
        log_module, "STREAM_CHUNK_BYTES", 1000
    )  # many chunk borders, mid-line and mid-character
    streamed = read_log(p, tail_bytes=None)
    assert streamed.bytes_read == p.stat().st_size and not streamed.truncated_read
    for field in (
        "oom",
        "phase",
        "step",
        "good_steps",
        "requested_mib",
        "frames",
        "last_loss",
        "total_steps",
    ):
        assert getattr(streamed, field) == getattr(whole, field), field


def test_utf16_log_whole_tail_and_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "train.log"
    lines = BANNER + [f" 0%|          | {n}/5000 [00:10<00:50,  6.02s/it]" for n in range(0, 300)] + TRACEBACK
    p.write_bytes(codecs.BOM_UTF16_LE + "\r\n".join(lines).encode("utf-16-le") + b"\r\x00\n\x00")
    monkeypatch.setattr(log_module, "STREAM_CHUNK_BYTES", 999)
    for facts in (read_log(p), read_log(p, tail_bytes=4001), read_log(p, tail_bytes=None)):
        assert (facts.encoding, facts.phase, facts.good_steps) == ("utf-16-le", "long_sample", 299)


def test_gbk_tail(tmp_path: Path) -> None:
    p = tmp_path / "train.log"
    text = "\r\n".join(BANNER + ["正在训练 " * 200] * 50 + TRACEBACK) + "\r\n"
    p.write_bytes(text.encode("gbk"))
    f = read_log(p, tail_bytes=4000)
    assert (f.encoding, f.oom, f.truncated_read) == ("gbk", True, True)


def test_trainer_log_file_and_output_dir(tmp_path: Path) -> None:
    records = [
        {
            "current_steps": 5,
            "total_steps": 50,
            "loss": 2.5,
            "lr": 5e-05,
            "epoch": 0.1,
            "vram_allocated": 7.9,
            "vram_reserved": 26.1,
        },
        {
            "current_steps": 10,
            "total_steps": 50,
            "loss": 1.2,
            "lr": 4.9e-05,
            "epoch": 0.2,
            "vram_allocated": 8.1,
            "vram_reserved": 27.9,
        },
        {
            "current_steps": 10,
            "total_steps": 50,
            "eval_loss": 1.4,
            "epoch": 0.2,
            "vram_allocated": 9.4,
            "vram_reserved": 28.0,
        },
    ]
    out = tmp_path / "saves"
    out.mkdir()
    jsonl = out / "trainer_log.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n{broken\n", encoding="utf-8")
    f = read_log(jsonl)
    assert (f.oom, f.phase, f.good_steps, f.total_steps, f.last_loss, f.eval_loss) == (
        False,
        "none",
        10,
        50,
        1.2,
        1.4,
    )
    assert (f.vram_allocated_gib, f.vram_reserved_gib) == (9.4, 28.0)
    # as text too (a pasted trainer_log.jsonl)
    assert parse_log_text(jsonl.read_text(encoding="utf-8")).good_steps == 10

    # the folder: a console capture that shows the OOM but no step counter, plus the jsonl with the steps
    (out / "running_log.txt").write_text("\n".join(BANNER[:2] + TRACEBACK) + "\n", encoding="utf-8")
    d = read_log(out)
    assert d.path == str(out / "running_log.txt")
    assert (d.oom, d.phase, d.good_steps, d.step, d.vram_reserved_gib) == (True, "long_sample", 10, 11, 28.0)


def test_output_dir_prefers_the_full_console_capture(tmp_path: Path) -> None:
    (tmp_path / "running_log.txt").write_text("\n".join(BANNER) + "\n", encoding="utf-8")
    (tmp_path / "train.log").write_text("\n".join(BANNER + TRACEBACK) + "\n", encoding="utf-8")
    f = read_log(tmp_path)
    assert f.path == str(tmp_path / "train.log") and f.oom


def test_small_log_reads_fast(tmp_path: Path) -> None:
    """Not a benchmark: a guard that a small log is not accidentally scanned in a slow way."""
    import time

    p = tmp_path / "train.log"
    p.write_text("\n".join(BANNER + TRACEBACK) * 20 + "\n", encoding="utf-8")
    read_log(p)  # tables loaded once
    t0 = time.perf_counter()
    read_log(p)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.skipif(os.name != "posix", reason="device files")
def test_not_a_regular_file() -> None:
    with pytest.raises(BadInput, match="not a file"):
        read_log("/dev/null")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file_is_bad_input(tmp_path: Path) -> None:
    p = tmp_path / "train.log"
    p.write_text("x\n", encoding="utf-8")
    p.chmod(0)
    with pytest.raises(BadInput, match="cannot be read"):
        read_log(p)


def test_an_oserror_while_reading_becomes_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "train.log"
    p.write_text("\n".join(BANNER + TRACEBACK) + "\n", encoding="utf-8")

    def vanished(*_args: object, **_kwargs: object) -> None:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(log_module, "_scan_file", vanished)
    with pytest.raises(BadInput, match="cannot be read"):
        read_log(p)


def test_progress_without_newlines_streams_and_tails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm alone writes only "\\r": a long log may hold no "\\n" at all until the traceback."""
    p = tmp_path / "train.log"
    bars = "".join(f"\r  1%|▏         | {n}/9000 [00:10<00:50,  6.02s/it]" for n in range(1, 3000))
    p.write_text(BANNER[1] + "\n" + bars + "Killed\n", encoding="utf-8")
    monkeypatch.setattr(log_module, "STREAM_CHUNK_BYTES", 4096)
    for facts in (read_log(p, tail_bytes=None), read_log(p, tail_bytes=8192)):
        assert (facts.oom_kind, facts.good_steps, facts.step) == ("killed", 2999, 3000)
