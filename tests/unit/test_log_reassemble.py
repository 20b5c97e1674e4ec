"""Messy logs put back together (facts/log_reassemble.py), on real messages from public threads."""

from __future__ import annotations

import textwrap

import pytest

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.log_reassemble import reassemble
from oomdoctor.facts.log_scan import LogScanner

# modelscope/ms-swift#5199, rank 0's message as printed (one line).
MS_SWIFT_5199 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.15 GiB. GPU 0 has a total capacity of "
    "47.54 GiB of which 188.75 MiB is free. Process 30047 has 47.34 GiB memory in use. Of the allocated memory "
    "45.83 GiB is allocated by PyTorch, and 1.07 GiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation."
)
# henrywoo/pyllama#38: the old format.
PYLLAMA_38 = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB (GPU 0; 12.00 GiB total "
    "capacity; 2.60 GiB already allocated; 8.36 GiB free; 2.62 GiB reserved in total by PyTorch) If reserved "
    "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation."
)
# pytorch/pytorch#111729: two processes writing at once; "torch.cuda" and "." end up on other lines.
PYTORCH_111729 = """\
  File "/home/developer/pytorch/torch/nn/modules/module.py", line 1501, in _call_impl
    return _C._VariableFunctions.rsub(self, other)
    attention_mask = self._prepare_decoder_attention_mask(torch.cuda
.  File "/home/developer/mambaforge/envs/FinGPT/lib/python3.8/site-packages/transformers/models/llama/modeling_llama.py", line 818, in _prepare_decoder_attention_mask
OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB (GPU 3; 11.93 GiB total capacity; 10.67 GiB already allocated; 515.38 MiB free; 11.93 GiB allowed; 10.92 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.
"""
# hiyouga/LLaMA-Factory (tests/cases/real_holdout.yaml): two ranks' identical headers interleaved.
GLUED = (
    "torch.cudatorch.cuda..OutOfMemoryErrorOutOfMemoryError: : CUDA out of memory. Tried to allocate 2.00 GiB "
    "(GPU 0; 79.15 GiB total capacity; 77.13 GiB already allocated; 307.31 MiB free; 78.21 GiB reserved in "
    "total by PyTorch)"
)


def numbers(text: str) -> tuple:
    f = parse_log_text(text)
    return (
        f.requested_mib,
        f.capacity_mib,
        f.free_mib,
        f.allocated_mib,
        f.reserved_unallocated_mib,
        [(p.pid, p.used_mib) for p in f.other_processes],
    )


def scanned_without_reassembly(text: str) -> tuple:
    from oomdoctor.facts.log import _facts_from

    s = LogScanner()
    s.feed_text(text)
    f = _facts_from(s, path=None, bytes_read=len(text))
    return (
        f.requested_mib,
        f.capacity_mib,
        f.free_mib,
        f.allocated_mib,
        f.reserved_unallocated_mib,
        [(p.pid, p.used_mib) for p in f.other_processes],
    )


ONE_LINE = numbers(MS_SWIFT_5199)


@pytest.mark.parametrize("width", [60, 80, 97, 120])
def test_terminal_wrap_at_a_fixed_width_keeps_every_number(width: int) -> None:
    wrapped = "\n".join(MS_SWIFT_5199[i : i + width] for i in range(0, len(MS_SWIFT_5199), width))
    assert numbers(wrapped) == ONE_LINE
    assert all(v is not None for v in ONE_LINE[:5]) and ONE_LINE[5] == [(30047, 47.34 * 1024)]


@pytest.mark.parametrize("width", [50, 70, 100])
def test_web_wrap_at_spaces_keeps_every_number(width: int) -> None:
    assert numbers("\n".join(textwrap.wrap(MS_SWIFT_5199, width))) == ONE_LINE


def test_the_wrap_lost_numbers_before() -> None:
    wrapped = "\n".join(MS_SWIFT_5199[i : i + 80] for i in range(0, len(MS_SWIFT_5199), 80))
    assert scanned_without_reassembly(wrapped) != ONE_LINE  # what this module is for


def test_old_format_wrapped_and_prefixed() -> None:
    wrapped = "\n".join(PYLLAMA_38[i : i + 72] for i in range(0, len(PYLLAMA_38), 72))
    assert numbers(wrapped) == numbers(PYLLAMA_38)
    assert numbers(PYLLAMA_38)[2] == pytest.approx(8.36 * 1024)


def test_doubled_header_of_two_processes() -> None:
    assert reassemble(GLUED).startswith(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00"
    )
    f = parse_log_text(GLUED)
    assert f.oom and f.requested_mib == 2048.0 and f.reserved_mib == pytest.approx(78.21 * 1024)


def test_two_messages_on_one_line_are_two_lines() -> None:
    a = "[rank1]: " + PYLLAMA_38
    b = PYLLAMA_38.replace("GPU 0", "GPU 1")
    lines = reassemble(a + b).splitlines()
    assert len(lines) == 2 and lines[1].startswith("torch.cuda.OutOfMemoryError")


def test_a_rank_line_started_mid_line_is_split() -> None:
    text = '[rank0]:   File "train.py", line 3, in <module>[rank1]:   File "train.py", line 9, in step\n'
    assert reassemble(text + "CUDA out of memory").splitlines()[:2] == [
        '[rank0]:   File "train.py", line 3, in <module>',
        '[rank1]:   File "train.py", line 9, in step',
    ]


def test_interleaved_processes_keep_the_message() -> None:
    f = parse_log_text(PYTORCH_111729)
    assert f.oom and f.requested_mib == 4096.0 and f.capacity_mib == pytest.approx(11.93 * 1024)
    assert "_prepare_decoder_attention_mask" in f.frames


def test_ray_worker_tags_become_process_prefixes() -> None:
    text = "(RayTrainWorker pid=4711, ip=10.0.0.2) Traceback (most recent call last):\n"
    assert reassemble(text).startswith("pid4711: Traceback")


def test_a_clean_log_is_unchanged() -> None:
    clean = "Loading checkpoint shards: 100%|##| 2/2\n{'loss': 1.2}\n"
    assert reassemble(clean) == clean
    assert reassemble(MS_SWIFT_5199 + "\n") == MS_SWIFT_5199 + "\n"


# unslothai/unsloth#465 (a Colab notebook): Colab prints frames as links to the file.
COLAB = """\
OutOfMemoryError                          Traceback (most recent call last)
[<ipython-input-7-3d62c575fcfd>](https://localhost:8080/#) in <cell line: 1>()
----> 1 trainer_stats = trainer.train()

13 frames
[/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py](https://localhost:8080/#) in _convert_to_fp32(tensor)
    780     def _convert_to_fp32(tensor):
--> 781         return tensor.float()

OutOfMemoryError: CUDA out of memory. Tried to allocate 9.47 GiB. GPU 0 has a total capacity of 14.75 GiB of which 3.78 GiB is free.
"""


def test_colab_frame_links_are_frames() -> None:
    assert (
        "File /usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py:0, in _convert_to_fp32"
        in (reassemble(COLAB))
    )
    f = parse_log_text(COLAB)
    assert f.frames == ["_convert_to_fp32"] and f.phase == "first_batch"
