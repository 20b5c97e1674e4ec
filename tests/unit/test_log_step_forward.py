"""Frames that tell the phase (data in facts/log_markers.yaml), each on a public thread's excerpt: a forward-only
traceback through a ZeRO-3 / FSDP gather or the attention kernel with no evaluation is the training step
(``step_forward_frames``); DeepSpeed init_inference and a Ray actor loading vLLM engines back are loading."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# deepspeedai/DeepSpeed#1624 (ZeRO-3, second iteration): the gather of a layer's parameters in a forward.
ZERO3_GATHER = (
    'File "/site-packages/torch/distributed/distributed_c10d.py", line 1432, in all_gather\n'
    "    work = _default_pg.allgather([tensor_list], [tensor])\n"
    "RuntimeError: CUDA out of memory. Tried to allocate 274.00 MiB (GPU 1; 23.70 GiB total capacity; 21.95 GiB "
    "already allocated; 25.69 MiB free; 22.28 GiB reserved in total by PyTorch)\n"
)
# hiyouga/LLaMA-Factory#7798 (RTX 5090, Qwen2.5-VL LoRA): a bare source line calling SDPA, then the message.
SDPA_LINE = (
    "   attn_output = F.scaled_dot_product_attention(q, k, v, attention_mask, dropout_p=0.0)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.11 GiB. GPU 0 has a total capacity of "
    "31.36 GiB of which 5.76 GiB is free.\n"
)


def test_a_zero3_gather_in_a_forward_is_the_training_step() -> None:
    assert parse_log_text(ZERO3_GATHER).phase == "first_batch"


def test_an_sdpa_call_in_a_forward_is_the_training_step() -> None:
    assert parse_log_text(SDPA_LINE).phase == "first_batch"


def test_a_plain_forward_frame_is_still_not_placed() -> None:
    text = SDPA_LINE.replace(
        "F.scaled_dot_product_attention(q, k, v, attention_mask, dropout_p=0.0)", "self.mlp(x)"
    )
    assert parse_log_text(text).phase == "unknown"


def test_a_gather_during_evaluation_stays_evaluation() -> None:
    text = "***** Running Evaluation *****\n  Num examples = 200\n" + ZERO3_GATHER
    assert parse_log_text(text).phase == "eval"


# deepspeedai/DeepSpeed#2933 (OPT-66B, init_inference on 8 x V100): the inference layers being built.
DS_INIT_INFERENCE = (
    '  File "/site-packages/deepspeed/model_implementations/transformers/ds_transformer.py", line 70, in __init__\n'
    "    self.mlp = DeepSpeedMLP(self.config,\n"
    '  File "/site-packages/deepspeed/ops/transformer/inference/ds_mlp.py", line 45, in __init__\n'
    "    self.output_w = nn.Parameter(torch.empty(intm_size_per_partition,\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 324.00 MiB (GPU 2; 31.75 GiB total "
    "capacity; 31.08 GiB already allocated; 216.50 MiB free; 31.08 GiB reserved in total by PyTorch)\n"
)
# Open-Reasoner-Zero/Open-Reasoner-Zero#21 (PPO on Ray): the vLLM engines loaded back before training, the
# driver re-raising the actor's OutOfMemoryError as RayTaskError(OutOfMemoryError).
RAY_BACKLOAD = (
    "Traceback (most recent call last):\n"
    '  File "/orz/ppo/trainer.py", line 70, in train\n'
    "    await self._backload_vllm_engines()\n"
    '  File "/orz/ppo/trainer.py", line 1289, in _backload_vllm_engines\n'
    "    await asyncio.gather(*backload_tasks)\n"
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::LLMActor.backload_to_gpu() (pid=11992, ip=10.148.9.90)\n"
)


def test_deepspeed_init_inference_is_loading() -> None:
    assert parse_log_text(DS_INIT_INFERENCE).phase == "load"


def test_a_ray_task_oom_backloading_vllm_is_a_gpu_oom_while_loading() -> None:
    log = parse_log_text(RAY_BACKLOAD)
    assert log.oom and log.ran_out_of == "gpu" and log.phase == "load"


def test_rays_own_memory_monitor_is_still_host_memory() -> None:
    log = parse_log_text(
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    )
    assert log.ran_out_of == "host"


# lm-sys/FastChat#256 (4 x A100-80G, FSDP): after the last step, FSDP's full state_dict cloning runs out; the
# OOM is printed inside its UserWarning on the same line.
FSDP_CLONE = (
    "{'train_runtime': 601.9411, 'train_samples_per_second': 7.029, 'train_loss': 1.4777254832513405, 'epoch': 1.0}\n"
    "/usr/local/lib/python3.10/site-packages/torch/distributed/fsdp/_state_dict_utils.py:312: UserWarning: Failed to "
    "clone() tensor with name _fsdp_wrapped_module.model.layers.39.mlp.gate_proj.weight on rank 1. This may mean that "
    "this state_dict entry could point to invalid memory regions after returning from state_dict() call if this "
    "parameter is managed by FSDP. Please check clone implementation of "
    "_fsdp_wrapped_module.model.layers.39.mlp.gate_proj.weight. Error: CUDA out of memory. Tried to allocate 270.00 "
    "MiB (GPU 1; 79.35 GiB total capacity; 76.93 GiB already allocated; 72.19 MiB free; 77.38 GiB reserved in total "
    "by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.\n"
    "  warnings.warn(\n"
)


def test_an_oom_inside_fsdps_state_dict_clone_warning_is_a_save() -> None:
    log = parse_log_text(FSDP_CLONE)
    assert log.oom and log.phase == "save"
    assert log.requested_mib == 270.0 and log.reserved_mib is not None
