"""The fast path for long runs of progress bars and loss lines gives the same facts as reading every line."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor.facts.log import _facts_from, read_log
from oomdoctor.facts.log_scan import LogScanner
from oomdoctor.facts.log_text import decode_block, split_lines
from oomdoctor.facts.types import to_jsonable

CASES = Path(__file__).resolve().parents[1] / "cases" / "logs"
DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo" / "train.log"
LOGS = sorted(p for p in CASES.iterdir() if p.is_file() and p.suffix in (".log", ".out")) + [DEMO]


def both_ways(text: str) -> tuple[dict, dict]:
    fast, slow = LogScanner(), LogScanner()
    fast.feed_text(text)
    slow.feed_lines(split_lines(text))
    return (
        to_jsonable(_facts_from(fast, path=None, bytes_read=0)),
        to_jsonable(_facts_from(slow, path=None, bytes_read=0)),
    )


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_same_facts_on_every_case_log(path: Path) -> None:
    raw = path.read_bytes()
    encoding = "utf-16-le" if raw.startswith(b"\xff\xfe") else None
    text, _ = decode_block(raw, encoding)
    fast, slow = both_ways(text)
    assert fast == slow


def test_same_facts_on_interleaved_train_and_eval_bars() -> None:
    bars = "".join(f"\r{n * 2:3d}%|█         | {n}/50 [00:10<00:50,  6.02s/it]" for n in range(1, 26))
    evals = "".join(f"\r{n * 4:3d}%|█         | {n}/25 [00:10<00:50,  2.4it/s]" for n in range(0, 12))
    loss = "".join(
        f"\r{' ' * 30}\r{{'loss': '{1 / n:.3f}', 'epoch': '{n / 50}'}}\n\r  {n * 2}%|█         | {n}/50 [00:10<00:50,  6.02s/it]"
        for n in range(26, 40)
    )
    text = (
        "[INFO|trainer.py:1469] >> ***** Running training *****\n"
        + bars
        + "\n***** Running Evaluation *****\n"
        + evals
        + "\n"
        + "{'eval_loss': '1.0', 'epoch': '0.5'}\n"
        + loss
        + "\n"
        + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    )
    fast, slow = both_ways(text)
    assert fast == slow
    assert (fast["good_steps"], fast["phase"], fast["last_loss"]) == (39, "long_sample", 0.026)


def test_fast_path_is_used_on_a_long_log(tmp_path: Path) -> None:
    """A long progress run is not fed line by line (the reason the path exists)."""
    lines = "".join(f"\r  1%|▏         | {n}/9000 [00:10<00:50,  6.02s/it]" for n in range(1, 5000)) + "\n"
    p = tmp_path / "train.log"
    p.write_text("[INFO|trainer.py:1469] >> ***** Running training *****\n" + lines, encoding="utf-8")
    scanner = LogScanner()
    scanner.feed_text(p.read_text(encoding="utf-8"))
    assert scanner.line_no < 10
    assert read_log(p).good_steps == 4999
