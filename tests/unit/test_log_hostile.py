"""The log reader on hostile input: a clean reading or BadInput, never another exception, in linear work.

Linearity is checked by size, not by the clock: each input is large enough that a quadratic pattern would
not finish within the suite (a 200,000-character bar line took the old bar regex hours), so a test that
returns is a test that stayed linear. Property tests draw arbitrary text and bytes (HYPOTHESIS_EXAMPLES sets
how many; CI's default keeps the suite quick)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomdoctor.errors import BadInput
from oomdoctor.facts.log import parse_log_text, read_log
from oomdoctor.facts.log_bar import find_bar
from oomdoctor.facts.log_scan import LogScanner

EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", "200"))
PROPERTY = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# the one-regex form the linear bar finder replaces: the reference for what a bar is
OLD_BAR = re.compile(
    r"(?P<desc>[^|\r\n]*?)\s*(?P<pct>\d{1,3})%\|[^|\n]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*(?:\[[^\]\n]*\])?"
)
BAR_ALPHABET = st.sampled_from(list(" \t\r\n5%|/[]:<█ab0123.,s/it") + ["%|", "| 3/9 [", "s/it]", " 10%|"])
LOG_PIECES = st.sampled_from(
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.17 GiB. GPU 0 has a total capacity of ",
        "Traceback (most recent call last):\n",
        '  File "/x/transformers/trainer.py", line 1909, in training_step\n',
        "***** Running training *****\n",
        "***** Running Evaluation *****\n",
        "  Total optimization steps = ",
        "[rank3]: ",
        "gpu-q-13: ",
        " 12%|█▏        | 6/50 [00:36<04:24,  6.02s/it]",
        "\r",
        "{'loss': '1.2', 'epoch': '0.1'}\n",
        "Killed\n",
        "Process 123 has 1.00 GiB memory in use. ",
        "│ /x/trainer.py:1929 in │\n",
        "9" * 50,
        "\x1b[31m",
        "\n",
    ]
)


def _read(text: str) -> None:
    with contextlib.suppress(BadInput):
        parse_log_text(text)


# ---------------------------------------------------------------------------------------------- properties
@PROPERTY
@given(st.lists(BAR_ALPHABET, max_size=40).map("".join))
def test_the_linear_bar_finder_finds_what_the_regex_found(text: str) -> None:
    m = OLD_BAR.search(text)
    bar = find_bar(text)
    if m is None:
        assert bar is None
        return
    assert bar is not None
    assert (bar.start, bar.end, bar.desc, bar.n, bar.total) == (
        m.start(),
        m.end(),
        m.group("desc"),
        int(m.group("n")),
        int(m.group("total")),
    )


@PROPERTY
@given(st.lists(st.one_of(LOG_PIECES, st.text(max_size=40)), max_size=40).map("".join))
def test_any_text_reads_cleanly(text: str) -> None:
    _read(text)


@PROPERTY
@given(st.binary(max_size=4000))
def test_any_bytes_read_cleanly(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "train.log"
    p.write_bytes(data)
    with contextlib.suppress(BadInput):
        read_log(p)


# ---------------------------------------------------------------------------------------------- long lines
def test_a_200k_character_bar_line_is_read_in_linear_work() -> None:
    bar = "  5%|" + "█" * 200_000
    for text in (bar, bar + "| 5/100 [00:10<03:10,  2.00s/it]\n", "x: " + bar.replace("█", " ")):
        _read(text)
    facts = parse_log_text(bar + "| 5/100 [00:10<03:10,  2.00s/it]\nKilled\n")
    assert (facts.oom_kind, facts.good_steps) == ("killed", 5)


def test_3000_glued_bars_on_one_line() -> None:
    glued = "".join(f" {n % 100:2d}%|█   | {n}/3000 [00:10<00:50,  6.02s/it]" for n in range(1, 3001))
    facts = parse_log_text("***** Running training *****\n" + glued + "Killed\n")
    assert facts.oom_kind == "killed" and facts.good_steps == 3000


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        + "9" * 5000
        + " GiB. GPU "
        + "7" * 5000,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1e309 GiB. Process "
        + "1" * 5000
        + " has 2.00 GiB memory in use.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " + "1," * 20000 + "5 GiB.",
        "[rank" + "3" * 5000 + "]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
        "  5%|█   | " + "5" * 5000 + "/" + "9" * 5000 + " [00:10<00:50,  6.02s/it]",
        "[" + "1" * 5000 + ":00<00:01, " + "9" * 400 + ".5s/it]",
        "Instantaneous batch size per device = " + "4" * 5000,
        "Process rank: 0, world size: " + "8" * 5000,
        "[ " + "1" * 5000 + "/50 02:54 < 02:06, 0.17 it/s, Epoch 0.56/1]",
        "GPU " + "1" * 5000 + ": NVIDIA A100 (UUID: GPU-1)",
        "9" * 5000 + " pytorch allocator cache flushes since last step",
        "GPU type: NVIDIA" + " " * 100_000 + "x",
        "torchrun --nproc_per_node" + " " * 16_000 + "x",
        "WORLD_SIZE" + " " * 16_000 + "x",
        "torchrun --nproc_per_node " + "8" * 5000,
    ],
    ids=lambda s: s[:30],
)
def test_absurd_numbers_and_whitespace_give_a_clean_reading(line: str) -> None:
    facts = parse_log_text(line + "\n")
    for value in (facts.requested_mib, facts.gpu_index, facts.rank, facts.instantaneous_batch_size):
        assert value is None or abs(value) < 10**18


def test_deeply_nested_trainer_log(tmp_path: Path) -> None:
    p = tmp_path / "trainer_log.jsonl"
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    p.write_text(
        '{"current_steps": 5, "total_steps": 50, "loss": 1.5, "epoch": 0.1}\n' + deep + "\n", encoding="utf-8"
    )
    facts = read_log(p)
    assert facts.good_steps == 5
    assert parse_log_text(p.read_text(encoding="utf-8")).good_steps == 5


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="not a file"):
        read_log(fifo)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "train.log")
    with pytest.raises(BadInput):
        read_log(out)


def test_a_long_line_is_read_as_its_two_halves() -> None:
    scanner = LogScanner()
    scanner.feed_text(
        "x" * 1_000_000 + " torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    )
    run, _ = scanner.result()
    assert run.failure is not None and run.failure.kind == "cuda_oom"
