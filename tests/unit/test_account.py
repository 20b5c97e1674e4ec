"""The OOM message read as an account of the card (facts/account.py), on real messages from public threads."""

from __future__ import annotations

import pytest

from oomdoctor.facts.account import account_json, account_of, account_text, fragmentation_is_real
from oomdoctor.facts.log import parse_log_text

# qingze-bai/VSmTrans#3: the current format with "this process", a 15.7 GiB card nearly full.
VSMTRANS_3 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 226.00 MiB. GPU 0 has a total capacity of "
    "15.70 GiB of which 210.38 MiB is free. Including non-PyTorch memory, this process has 15.48 GiB memory in "
    "use. Of the allocated memory 14.81 GiB is allocated by PyTorch, and 336.73 MiB is reserved by PyTorch but "
    "unallocated."
)
# modelscope/ms-swift#5199 (rank 0 of two, in a container): the run itself listed as "Process 30047".
MS_SWIFT_5199 = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.15 GiB. GPU 0 has a total capacity "
    "of 47.54 GiB of which 188.75 MiB is free. Process 30047 has 47.34 GiB memory in use. Of the allocated "
    "memory 45.83 GiB is allocated by PyTorch, and 1.07 GiB is reserved by PyTorch but unallocated."
)
# Zheng-Chong/CatVTON#133: this process plus a small CUDA context of another pid.
CATVTON_133 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 36.00 GiB. GPU 0 has a total capacity of "
    "14.56 GiB of which 10.22 GiB is free. Including non-PyTorch memory, this process has 4.11 GiB memory in "
    "use. Process 17435 has 240.00 MiB memory in use. Of the allocated memory 3.72 GiB is allocated by PyTorch, "
    "and 264.21 MiB is reserved by PyTorch but unallocated."
)
# hiyouga/LLaMA-Factory (tests/cases/real_holdout.yaml, lf-2638): the card held by another job's process.
LF_2638 = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 982.00 MiB. GPU 3 has a total capacity "
    "of 44.47 GiB of which 260.38 MiB is free. Process 100842 has 44.05 GiB memory in use. Including non-PyTorch "
    "memory, this process has 164.00 MiB memory in use. Of the allocated memory 4.50 KiB is allocated by "
    "PyTorch, and 2.00 MiB is reserved by PyTorch but unallocated."
)
# The old format on a 22 GiB card that this run barely uses (a public vse_infty training log, 2021-06-19,
# BERT under DataParallel): capacity - reserved - free says someone else holds the card.
OLD_FORMAT_HELD = (
    "RuntimeError: CUDA out of memory. Tried to allocate 18.00 MiB (GPU 0; 22.38 GiB total capacity; 1.30 GiB "
    "already allocated; 9.56 MiB free; 1.33 GiB reserved in total by PyTorch)"
)
# JDAI-CV/centerX#51: the old format, the card used by this run (what lies outside its reserve is a context).
CENTERX_51 = (
    "RuntimeError: CUDA out of memory. Tried to allocate 130.00 MiB (GPU 1; 7.80 GiB total capacity; 5.91 GiB "
    "already allocated; 33.56 MiB free; 6.09 GiB reserved in total by PyTorch)"
)


def acc(text: str):
    a = account_of(parse_log_text(text))
    assert a is not None
    return a


def test_this_process_terms_add_up_to_the_card() -> None:
    a = acc(VSMTRANS_3)
    assert a.this_run_source == "message"
    assert a.this_run_mib == pytest.approx(15.48 * 1024)
    assert a.non_pytorch_mib == pytest.approx(15.48 * 1024 - 14.81 * 1024 - 336.73, abs=1)
    assert a.outside_mib == 0.0  # 15 MiB of rounding is not another process
    line = account_text(a)
    assert line["en"].startswith("card 16,077 MiB = this run 15,852 (PyTorch 15,165 + reserved-unused 337")
    assert "+ free 210" in line["en"] and "整卡 16,077 MiB" in line["zh"]


def test_a_nearly_full_card_is_not_fragmentation() -> None:
    # 337 MiB unused on 15.7 GiB (2 %): no setting wins that back
    assert fragmentation_is_real(acc(VSMTRANS_3)) is False
    assert fragmentation_is_real(acc(MS_SWIFT_5199)) is False


def test_the_run_listed_under_its_host_pid_is_this_run() -> None:
    a = acc(MS_SWIFT_5199)
    assert a.self_pid == 30047 and a.this_run_source == "listed" and not a.listed
    assert a.stranger_mib == 0
    assert "Process 30047" in account_text(a)["en"] and "this run itself" in account_text(a)["en"]


def test_a_small_context_is_not_another_job() -> None:
    a = acc(CATVTON_133)
    assert [(p.pid, p.whose) for p in a.listed] == [(17435, "context")]
    assert a.stranger_mib == 0


def test_a_stranger_that_holds_the_card() -> None:
    a = acc(LF_2638)
    assert [(p.pid, p.whose) for p in a.listed] == [(100842, "stranger")]
    assert a.stranger_mib == pytest.approx(44.05 * 1024)
    assert "another job" in account_text(a)["en"]


def test_old_format_reveals_a_card_held_by_someone_else() -> None:
    a = acc(OLD_FORMAT_HELD)
    assert a.old_format and a.this_run_mib is None
    assert a.outside_mib == pytest.approx(22.38 * 1024 - 1.33 * 1024 - 9.56, abs=1)
    assert a.stranger_mib > 18 * 1024
    assert "another process very likely" in account_text(a)["en"]


def test_old_format_context_only() -> None:
    a = acc(CENTERX_51)
    assert a.old_format and a.stranger_mib == 0
    assert "at least 6,236" in account_text(a)["en"]


def test_unclear_when_the_run_is_not_listed_and_an_entry_could_be_it() -> None:
    # the GRPO shape: a small PyTorch reserve, one listed process far larger (a vLLM engine in the same
    # process keeps its memory outside PyTorch's reserve), and room on the card for both readings
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.25 GiB of which 1.10 GiB is free. Process 5511 has 60.00 GiB memory in use. Of the allocated memory "
        "9.50 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated."
    )
    a = acc(text)
    assert [p.whose for p in a.listed] == ["unclear"]
    assert "cannot tell" in account_text(a)["en"]


def test_json_object() -> None:
    j = account_json(acc(LF_2638))
    assert j is not None and j["processes"][0]["whose"] == "stranger"
    assert set(j["line"]) == {"en", "zh"}
    assert account_json(None) is None


def test_a_request_bigger_than_the_card_is_never_fragmentation() -> None:
    # Zheng-Chong/CatVTON#133: 36 GiB asked of a 14.56 GiB card; the unused reserve cannot have served it
    assert fragmentation_is_real(acc(CATVTON_133)) is False
    # and a reserve that is a real share and could have served the request is (LLaMA-Factory#6800's numbers)
    real = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 3 has a total capacity of "
        "31.74 GiB of which 1.41 GiB is free. Including non-PyTorch memory, this process has 30.26 GiB memory in "
        "use. Of the allocated memory 23.51 GiB is allocated by PyTorch, and 5.51 GiB is reserved by PyTorch but "
        "unallocated."
    )
    assert fragmentation_is_real(acc(real)) is True


def test_a_listed_process_that_holds_all_the_memory_in_use_is_this_run() -> None:
    # unslothai/unsloth#465 (a T4 notebook at 18k context), the message cut before PyTorch's own figures: the
    # one listed process holds everything in use, so this run has no room beside it - it is this run
    text = (
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 9.47 GiB. GPU 0 has a total capacity of 14.75 GiB "
        "of which 3.78 GiB is free. Process 2116 has 10.95 GiB memory in use. Of th"
    )
    a = acc(text)
    assert a.self_pid == 2116 and not a.listed and a.stranger_mib == 0
