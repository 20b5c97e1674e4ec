"""The numbers of an out-of-memory message, field by field, in both PyTorch formats and the host forms."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log_oom import first_message, parse_oom_numbers, size_to_mib

NEW = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 3 has a total capacity of "
    "31.74 GiB of which 1.41 GiB is free. Including non-PyTorch memory, this process has 30.26 GiB memory in use. "
    "Of the allocated memory 23.51 GiB is allocated by PyTorch, and 5.51 GiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
OLD = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB (GPU 2; 79.17 GiB total "
    "capacity; 76.68 GiB already allocated; 381.31 MiB free; 77.24 GiB reserved in total by PyTorch) If reserved "
    "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation."
)


@pytest.mark.parametrize(
    ("value", "unit", "mib"),
    [
        ("4.64", "GiB", 4751.36),
        ("896.00", "MiB", 896.0),
        ("512", "KiB", 0.5),
        ("1073741824", "bytes", 1024.0),
        ("2097152", "B", 2.0),
        ("1,073,741,824", "bytes", 1024.0),
        ("2", "GB", 2048.0),  # read as binary, like torch's GiB
        ("1", "TiB", 1048576.0),
    ],
)
def test_size_to_mib(value: str, unit: str, mib: float) -> None:
    assert size_to_mib(value, unit) == mib


def test_size_to_mib_rejects_unknown_units() -> None:
    with pytest.raises(ValueError):
        size_to_mib("3", "parsecs")


def test_new_format_every_field() -> None:
    n = parse_oom_numbers(NEW)
    assert n.requested_mib == 4751.36
    assert n.gpu_index == 3
    assert n.capacity_mib == 32501.76
    assert n.free_mib == 1443.84
    assert n.process_in_use_mib == 30986.24
    assert n.allocated_mib == 24074.24
    assert n.reserved_unallocated_mib == 5642.24
    assert n.reserved_mib == pytest.approx(24074.24 + 5642.24)
    assert n.other_processes == []


def test_old_format_derives_reserved_but_unallocated() -> None:
    n = parse_oom_numbers(OLD)
    assert (n.requested_mib, n.gpu_index) == (896.0, 2)
    assert n.capacity_mib == pytest.approx(79.17 * 1024)
    assert n.allocated_mib == pytest.approx(76.68 * 1024)
    assert n.free_mib == 381.31
    assert n.reserved_mib == pytest.approx(77.24 * 1024)
    assert n.reserved_unallocated_mib == pytest.approx((77.24 - 76.68) * 1024, abs=0.01)
    assert n.process_in_use_mib is None


def test_capacty_typo_and_other_processes() -> None:
    text = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 136.00 MiB. GPU 0 has a total capacty "
        "of 31.73 GiB of which 24.69 MiB is free. Process 149826 has 16.98 GiB memory in use. Process 77 has "
        "512.00 MiB memory in use. Including non-PyTorch memory, this process has 14.72 GiB memory in use. Of the "
        "allocated memory 14.41 GiB is allocated by PyTorch, and 11.15 MiB is reserved by PyTorch but unallocated."
    )
    n = parse_oom_numbers(text)
    assert n.capacity_mib == pytest.approx(31.73 * 1024)
    assert n.free_mib == 24.69
    assert n.other_processes == [(149826, pytest.approx(16.98 * 1024)), (77, 512.0)]
    assert n.process_in_use_mib == pytest.approx(14.72 * 1024)


def test_oldest_format_with_cached() -> None:
    text = (
        "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
        "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)"
    )
    n = parse_oom_numbers(text)
    assert (n.requested_mib, n.allocated_mib, n.reserved_mib) == (12.5, 8.57, 4.68)
    assert n.free_mib == pytest.approx(9.28 * 1024)
    assert n.reserved_unallocated_mib == 0.0  # never negative


def test_two_messages_on_one_line_read_the_first() -> None:
    line = (
        NEW
        + " See documentation ftorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB."
    )
    first = first_message(line)
    assert first.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB")
    assert "50.00 MiB" not in first and "fragmentation. See documentation" in first
    assert parse_oom_numbers(line).requested_mib == 4751.36


@pytest.mark.parametrize(
    ("line", "mib"),
    [
        (
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes. Error code 12",
            1024.0,
        ),
        (
            "RuntimeError: unable to mmap 1451386728 bytes from file </m/model.safetensors>: Cannot allocate memory (12)",
            1384.15,
        ),
        (
            "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 1.50 GiB for an array with shape (3, 4)",
            1536.0,
        ),
    ],
)
def test_host_requests(line: str, mib: float) -> None:
    n = parse_oom_numbers(line)
    assert n.requested_mib == mib
    assert n.capacity_mib is None and n.gpu_index is None


def test_nothing_stated_stays_none() -> None:
    n = parse_oom_numbers("torch.AcceleratorError: CUDA error: out of memory")
    assert all(
        v is None
        for v in (n.requested_mib, n.capacity_mib, n.free_mib, n.allocated_mib, n.reserved_mib, n.gpu_index)
    )
