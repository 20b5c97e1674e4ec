"""vLLM's sleep mode in an RL trainer that colocates the generator with the policy: "It took N seconds to wake
up" is the engine loading its weights and KV cache back inside a training step (a load the completed steps do
not contradict), "fall asleep" / "Sleep mode freed" hands the card back to the step's forward and backward."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# modelscope/ms-swift#7826 (GRPO, vLLM colocated, 8 x H800): the first step ends, the engines wake up, rank 3
# fails
WAKE_UP = """\
Train:   0%|          | 1/888 [13:18<196:38:30, 798.10s/it]
Train:   0%|          | 1/888 [13:18<196:38:30, 798.10s/it]INFO 01-19 21:02:18 [executor_base.py:205] It took 1.241156 seconds to wake up tags ['weights'].
INFO 01-19 21:02:18 [executor_base.py:205] It took 1.272414 seconds to wake up tags ['weights'].
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.10 GiB of which 6.00 MiB is free. Process 566680 has 79.00 GiB memory in use. Of the allocated memory 77.41 GiB is allocated by PyTorch, with 184.91 MiB allocated in private pools (e.g., CUDA Graphs), and 47.15 MiB is reserved by PyTorch but unallocated.
"""
ASLEEP = "INFO 01-19 21:03:02 [executor_base.py:190] It took 2.118407 seconds to fall asleep.\n"


def test_waking_the_engine_is_a_load_inside_the_step() -> None:
    f = parse_log_text(WAKE_UP)
    assert f.phase == "load" and f.phase_confidence == "high"
    assert f.good_steps == 1  # the step done before it is kept, and does not turn it into a conflict
    assert any("vLLM engine was waking up" in e for e in f.phase_evidence)


def test_after_the_engine_falls_asleep_it_is_the_training_step() -> None:
    at, oom = WAKE_UP.index("[rank3]"), WAKE_UP[WAKE_UP.index("[rank3]") :]
    f = parse_log_text(WAKE_UP[:at] + ASLEEP + oom)
    assert f.phase != "load" and f.training_started
    assert set(f.phase_candidates) == {"first_batch", "long_sample"}  # one step done: asked


def test_an_ordinary_loading_line_after_steps_is_still_a_conflict() -> None:
    conflict = WAKE_UP.replace(
        "It took 1.241156 seconds to wake up tags ['weights'].", "Loading checkpoint shards: 100%"
    ).replace(
        "INFO 01-19 21:02:18 [executor_base.py:205] It took 1.272414 seconds to wake up tags ['weights'].\n",
        "",
    )
    f = parse_log_text(conflict)
    assert f.phase == "unknown"


def test_vllm_capturing_its_cuda_graphs_is_loading() -> None:
    bar = "Capturing CUDA graph shapes:  63%|██████▎   | 22/35 [00:08<00:04,  2.70it/s]\n"
    oom = WAKE_UP[WAKE_UP.index("[rank3]") :]
    f = parse_log_text(bar + oom)
    assert f.phase == "load" and not f.training_started
