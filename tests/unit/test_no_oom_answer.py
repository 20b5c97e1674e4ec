"""``memory_kind=none`` ("it did not run out of memory") is an answer only where no log line shows an OOM: beside a
real CUDA OOM line it is refused as bad input (one line, exit 2), not taken over the line (review2 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor.cli import main

OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of "
    "23.55 GiB of which 150.81 MiB is free.\n"
)
CUT = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    trainer.train()\n'


def _log(tmp_path: Path, text: str) -> str:
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_beside_an_oom_line_the_answer_none_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["diagnose", "--log", _log(tmp_path, OOM_LINE), "--answer", "memory_kind=none", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and "memory_kind=none" in err and len(err.strip().splitlines()) == 1
    assert "internal error" not in err


def test_beside_a_cut_traceback_it_says_no_oom(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["diagnose", "--log", _log(tmp_path, CUT), "--answer", "memory_kind=none", "--json"])
    assert code == 0 and '"oom": false' in capsys.readouterr().out
