"""A colocated vLLM engine waking up from sleep mode (GRPO / PPO on one card): the cumem allocator's own OOM
wording, vLLM's logger prefix and Ray's dedup suffix on its traceback lines, and the wake-up frames placing it
(facts/log_markers.yaml, facts/log_scan.py). Shape: an OpenRLHF PPO run on Ray whose vLLM actor fails in
``allocator.wake_up`` right after a training epoch's bar reached 100 %."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

TAG = "(LLMRayActor pid=31877) ERROR 11-02 08:14:51 [core.py:459] "
WAKE_UP = "\n".join(
    [
        "Train epoch [1/1]: 100%|██████████| 4/4 [00:21<00:00,  5.30s/it, act_loss=0.113, reward=0.41]",
        "Traceback (most recent call last):",
        '  File "/opt/openrlhf/cli/train_ppo_ray.py", line 410, in <module>',
        "    train(args)",
        "[...]",
        TAG + '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 301, in wake_up',
        TAG + "    self.model_executor.wake_up(tags)",
        TAG + '  File "/usr/lib/python3/site-packages/vllm/device_allocator/cumem.py", line 219, in wake_up '
        "[repeated 2x across cluster]",
        TAG + "    create_and_map(handle) [repeated 2x across cluster]",
        TAG
        + '  File "/usr/lib/python3/site-packages/vllm/device_allocator/cumem.py", line 77, in create_and_map',
        TAG + "    python_create_and_map(*allocation_handle)",
        TAG + "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62 "
        "[repeated 2x across cluster]",
        "(LLMRayActor pid=31877) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
    ]
)


def test_cumem_out_of_memory_is_a_gpu_oom() -> None:
    f = parse_log_text("RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n")
    assert f.oom and f.ran_out_of == "gpu"


def test_engine_waking_up_is_the_generator_loading_with_its_own_memory_as_cause() -> None:
    f = parse_log_text(WAKE_UP + "\n")
    assert f.oom and f.ran_out_of == "gpu"
    assert f.phase == "load" and f.phase_confidence == "high"
    assert "create_and_map" in f.frames
    evidence = " ".join(f.phase_evidence)
    assert "waking up" in evidence and "not the batch's activations" in evidence


def test_engine_logger_prefix_is_kept_on_lines_that_are_not_traceback_text() -> None:
    # an ordinary vLLM log line stays as printed (a marker or a later reader may need its words)
    f = parse_log_text(
        "ERROR 11-02 08:14:51 [core.py:459] EngineCore failed to start.\n"
        "INFO 11-02 08:14:40 [gpu_worker.py:88] Sleep mode freed 61.02 GiB memory\n"
    )
    assert not f.oom and f.phase == "none"


def test_wake_up_in_a_code_line_alone_places_it() -> None:
    # a cut excerpt keeping only the source lines under the frames
    log = "\n".join(
        [
            "    allocator.wake_up(tags)",
            "    create_and_map(handle)",
            "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        ]
    )
    assert parse_log_text(log + "\n").phase == "load"


def test_vllm_engine_without_room_for_its_kv_cache_is_a_gpu_failure_while_loading() -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/trl/trainer/grpo_trainer.py", line 612, in __init__',
            "    self.llm = LLM(",
            '  File "/usr/lib/python3/site-packages/vllm/engine/llm_engine.py", line 276, in __init__',
            "    self._initialize_kv_caches()",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.ran_out_of == "gpu" and f.phase == "load" and f.other_error is None
    # another ValueError of vLLM's set-up is not memory
    other = parse_log_text("ValueError: Unknown quantization method: fp5. Must be one of ['awq', 'gptq'].\n")
    assert not other.oom and other.other_error


def test_hip_runtime_out_of_memory_is_a_gpu_oom() -> None:
    assert parse_log_text("RuntimeError: HIP error: out of memory\n").ran_out_of == "gpu"
