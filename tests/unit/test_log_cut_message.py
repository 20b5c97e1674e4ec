"""An OOM message cut short (a copy that stops mid-sentence) keeps the number before the cut
(facts/log_oom.py ``_read_cut_tail``); a number whose leading words are gone is not guessed."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.log_oom import parse_oom_numbers

HEAD = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 1 has a total capacity of 44.35 GiB"


def test_cut_after_this_process_s_share() -> None:
    n = parse_oom_numbers(
        HEAD + " of which 301.38 MiB is free. Including non-PyTorch memory, this process has 44.05 GiB"
    )
    assert n.requested_mib == 512.0 and n.free_mib == 301.38 and n.process_in_use_mib == 45107.2


def test_cut_after_the_free_memory_and_after_a_listed_process() -> None:
    assert parse_oom_numbers(HEAD + " of which 301.38 MiB").free_mib == 301.38
    n = parse_oom_numbers(
        HEAD
        + " of which 301.38 MiB is free. Process 5120 has 30.10 GiB memory in use. Process 5121 has 13.90 GiB"
    )
    assert n.other_processes == [(5120, 30822.4), (5121, 14233.6)]


def test_cut_in_the_old_format_after_the_allocated_memory() -> None:
    n = parse_oom_numbers(
        "RuntimeError: CUDA out of memory. Tried to allocate 86.00 MiB (GPU 0; 15.78 GiB total capacity; 14.21 GiB already"
    )
    assert n.capacity_mib == 16158.72 and n.allocated_mib == 14551.04 and n.free_mib is None


def test_a_number_without_its_words_is_not_read() -> None:
    # "(GPU 4; 7" : the capacity's digits are cut before its unit and words
    n = parse_oom_numbers(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.88 GiB (GPU 4; 7"
    )
    assert n.requested_mib == 26501.12 and n.capacity_mib is None and n.gpu_index == 4
    # a size at the end of a message that is not one of the cut sentences stays unread
    n = parse_oom_numbers(HEAD + " and more than 3.00 GiB")
    assert n.free_mib is None and n.process_in_use_mib is None and n.allocated_mib is None


def test_the_log_reader_keeps_the_cut_number_of_the_last_line() -> None:
    f = parse_log_text(
        "some training\n"
        + HEAD
        + " of which 301.38 MiB is free. Including non-PyTorch memory, this process has 44.05 GiB\n"
    )
    assert f.oom and f.process_in_use_mib == 45107.2


def test_a_message_cut_inside_a_word_after_its_last_number_keeps_that_number() -> None:
    # ms-swift (a real public thread): the stored message ends inside "22.25 GiB i[s free]"
    head = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 34.83 GiB. GPU 0 has a total "
        "capacity of 44.55 GiB of which 22.25 GiB i"
    )
    assert parse_oom_numbers(head).free_mib == 22784.0
    assert parse_oom_numbers(HEAD + " this process has 39.28 GiB memo").process_in_use_mib == 40222.72
    # a word that is not the start of the sentence's words leaves it unread
    assert parse_oom_numbers(HEAD + " of which 22.25 GiB x").free_mib is None
