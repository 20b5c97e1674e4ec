"""Step lines (a trainer's own per-step line, DeepSpeed's step report) are summed up in the gaps of the big-file
reader, as bars and loss dicts are: the windowed reader gives the line-by-line reader's facts and leaves most of
such a log undecoded."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor.facts import log as log_module
from oomdoctor.facts import log_window
from oomdoctor.facts.log_scan import LogScanner
from oomdoctor.facts.log_window import WindowSizes
from oomdoctor.facts.types import to_jsonable

TINY = WindowSizes(before=4, after=8, margin_bytes=1024, end=4, detail_chunk=512)
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.33 GiB of which 1.02 GiB is free.\n"
)


def _facts(path: Path, scan) -> dict:
    scanner = LogScanner()
    bytes_read, truncated, encoding = scan(scanner)
    return to_jsonable(
        log_module._facts_from(
            scanner, path=str(path), bytes_read=bytes_read, truncated=truncated, encoding=encoding
        )
    )


def _step_log(path: Path, steps: int, line: str, *, prose_every: int = 0) -> Path:
    out = ["[INFO|trainer.py:1469] >> ***** Running training *****\n"]
    for n in range(1, steps + 1):
        out.append(line.format(n=n))
        if prose_every and n % prose_every == 0:
            out.append(
                "the next step of the schedule is planned\n"
            )  # holds a literal (" step "), is no step line
    path.write_text("".join(out) + OOM, encoding="utf-8")
    return path


DEEPSPEED = (
    "[2026-11-12 15:00:00,000] [INFO] [logging.py:128:log_dist] [Rank 0] step={n}, skipped=0, lr=[4.9e-05]\n"
)
LITGPT = "iter {n} step {n}: loss 2.9911, iter time: 400.10ms\n"


@pytest.mark.parametrize(("line", "prose_every"), [(DEEPSPEED, 0), (LITGPT, 0), (LITGPT, 7)])
def test_step_lines_in_the_gaps_give_the_same_facts(tmp_path: Path, line: str, prose_every: int) -> None:
    path = _step_log(tmp_path / "train.log", 3000, line, prose_every=prose_every)
    whole = _facts(path, lambda s: log_module._scan_file_whole(path, s, log_module.DEFAULT_TAIL_BYTES))
    assert whole["good_steps"] == 3000 and whole["phase"] == "long_sample"
    for sizes in (TINY, log_window.DEFAULT_SIZES):
        windowed = _facts(
            path, lambda s, sizes=sizes: log_module._scan_file(path, s, log_module.DEFAULT_TAIL_BYTES, sizes)
        )
        assert windowed == whole


def test_a_log_of_step_lines_is_mostly_left_undecoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[int] = []
    real_feed = log_window._Reader.feed

    def counting_feed(self, start: int, end: int, line_start: int | None = None) -> None:
        decoded.append(end - start)
        real_feed(self, start, end, line_start)

    monkeypatch.setattr(log_window._Reader, "feed", counting_feed)
    path = _step_log(tmp_path / "train.log", 3000, DEEPSPEED)
    facts = _facts(path, lambda s: log_module._scan_file(path, s, log_module.DEFAULT_TAIL_BYTES))
    assert facts["good_steps"] == 3000
    assert sum(decoded) < path.stat().st_size / 10
