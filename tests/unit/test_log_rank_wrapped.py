"""An OOM message that torchrun prefixed line by line ("[rank3]: "), wrapped by the terminal: every number is read
from the lines of the same prefix, whatever the line breaks; another rank's line ends the message."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# zai-org/GLM-4#785 (tests/cases/real_round7_other.yaml): GLM-4V-9B LoRA on four 4090s
WRAPPED = "".join(
    line + "\n"
    for line in (
        "[rank3]: OutOfMemoryError: CUDA out of memory. Tried to allocate 986.00 MiB. GPU 3 has a total capacity of 23.64 GiB of which 499.69 MiB is free. Including non-PyTorch memory, this process has 23.15 GiB",
        "[rank3]: memory in use. Of the allocated memory 18.71 GiB is allocated by PyTorch, and 3.83 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting ",
        "[rank3]: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    )
)  # the second line ends in a space, as printed


def test_every_number_of_a_rank_prefixed_wrapped_message_is_read() -> None:
    f = parse_log_text(WRAPPED)
    assert f.oom and f.rank == 3
    assert f.requested_mib == 986.0
    assert f.capacity_mib is not None and abs(f.capacity_mib - 23.64 * 1024) < 0.1
    assert f.free_mib == 499.69
    assert f.process_in_use_mib is not None and abs(f.process_in_use_mib - 23.15 * 1024) < 0.1
    assert f.allocated_mib is not None and abs(f.allocated_mib - 18.71 * 1024) < 0.1
    assert f.reserved_unallocated_mib is not None and abs(f.reserved_unallocated_mib - 3.83 * 1024) < 0.1


def test_another_ranks_line_is_not_read_into_the_message() -> None:
    first = WRAPPED.splitlines()[0]
    other = (
        "[rank1]: memory in use. Of the allocated memory 1.00 GiB is allocated by PyTorch, and 2.00 GiB is"
    )
    f = parse_log_text("\n".join([first, other]) + "\n")
    # rank 1's words are not rank 3's numbers
    assert f.allocated_mib is None and f.reserved_unallocated_mib is None


def test_a_host_prefixed_wrapped_message_is_read_whole_too() -> None:
    # pdsh / the DeepSpeed multi-node runner prefix each line with the node ("10.0.0.6: ")
    host = WRAPPED.replace("[rank3]: ", "10.0.0.6: ")
    f = parse_log_text(host)
    assert f.host == "10.0.0.6" and f.allocated_mib is not None and abs(f.allocated_mib - 18.71 * 1024) < 0.1
    assert f.reserved_unallocated_mib is not None and abs(f.reserved_unallocated_mib - 3.83 * 1024) < 0.1
