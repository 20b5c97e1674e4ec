"""A rank whose OOM message came without frames takes the traceback of another rank that ran out the same way
(facts/log_scan.py ``_adopt(sibling=True)``): data-parallel ranks run the same code, so that traceback tells the
phase; the evidence says whose frames they are. Shape: an 8-GPU LLaMA-Factory run where rank 5 prints only its
message and rank 6 its traceback and message, interleaved."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text


def _message(gpu: int, free: str) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU {gpu} has a total capacity "
        f"of 79.15 GiB of which {free} is free. Including non-PyTorch memory, this process has 78.85 GiB memory in use."
    )


LOAD_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/opt/LLaMA-Factory/src/llamafactory/model/loader.py", line 173, in load_model',
    "    model = load_class.from_pretrained(**init_kwargs)",
    '  File "/opt/conda/lib/python3.10/site-packages/transformers/modeling_utils.py", line 4225, in from_pretrained',
    "    ) = cls._load_pretrained_model(",
]


def test_the_first_rank_s_bare_message_takes_its_sibling_s_frames() -> None:
    lines = [f"[rank6]: {x}" for x in LOAD_FRAMES[:3]] + [f"[rank5]: {_message(5, '301.19 MiB')}"]
    lines += [f"[rank6]: {x}" for x in LOAD_FRAMES[3:]] + [f"[rank6]: {_message(6, '295.19 MiB')}"]
    f = parse_log_text("\n".join(lines) + "\n")
    assert f.oom and f.rank == 5 and f.gpu_index == 5 and f.free_mib == 301.19  # rank 5's own numbers
    assert f.phase == "load" and "from_pretrained" in f.frames
    assert any("rank6" in e and "rank5" in e for e in f.phase_evidence)


def test_a_sibling_torn_down_by_another_error_lends_no_frames() -> None:
    lines = [f"[rank5]: {_message(5, '301.19 MiB')}"] + [f"[rank6]: {x}" for x in LOAD_FRAMES]
    lines += ["[rank6]: RuntimeError: NCCL communicator was aborted on rank 6."]
    f = parse_log_text("\n".join(lines) + "\n")
    assert f.oom and f.rank == 5 and f.phase == "unknown" and f.frames == []


def test_a_failure_with_frames_of_its_own_keeps_them() -> None:
    own = [
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 3580, in training_step',
        "    self.accelerator.backward(loss, **kwargs)",
    ]
    lines = [f"[rank5]: {x}" for x in own] + [f"[rank5]: {_message(5, '301.19 MiB')}"]
    lines += [f"[rank6]: {x}" for x in LOAD_FRAMES] + [f"[rank6]: {_message(6, '295.19 MiB')}"]
    f = parse_log_text("\n".join(lines) + "\n")
    assert f.phase == "first_batch" and "from_pretrained" not in f.frames
