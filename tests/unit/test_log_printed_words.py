"""What programs print, read where it was missed (round 8): torch's "Allocation on device" wording of its
OutOfMemoryError as ComfyUI prints it, a custom training loop's validation pass in a cut traceback, NeMo RL's
loss frames. The reporter's own sentences are not log evidence: "提示OOM" or "内存…100%" beside a bare launcher
line says nothing (oomdoctor reads the user's training log, which holds what programs print)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text


def test_comfyuis_allocation_on_device_line_is_a_gpu_oom_in_the_first_step() -> None:
    log = "\n".join(
        [
            "Epoch 1/134 - steps:   0%|          | 0/1600 [00:00<?, ?it/s]2025-07-08 10:39:40 ERROR    !!! "
            "Exception during processing !!! Allocation on device                   execution.py:430",
            "                    ERROR    Traceback (most recent call last):                     execution.py:431",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.oom_kind == "cuda_oom" and f.ran_out_of == "gpu"
    assert f.phase == "first_batch"


def test_torchs_allowed_memory_wording_is_a_gpu_oom() -> None:
    f = parse_log_text(
        "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\n"
    )
    assert f.oom and f.ran_out_of == "gpu"


def test_the_reporters_sentences_are_no_log_evidence() -> None:
    log = "\n".join(
        [
            "运行时，提示OOM的错误，信息如下：",
            "机器内存共900G，加载数据阶段就会内存溢出，最终不可回收内存达到100%然后程序终止。",
            "torch/distributed/elastic/multiprocessing/api.py:897] Sending process 3802 closing signal SIGTERM",
        ]
    )
    f = parse_log_text(log + "\n")
    assert not f.oom and f.phase == "none"


def test_a_custom_loops_validation_pass_in_a_cut_traceback_is_the_evaluation() -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/home/u/GenCAD/train_gencad.py", line 108, in train_model',
            "    ccip_trainer.train(train_loader=train_loader, val_loader=val_loader, ckpt=args.ckpt_path)",
            '  File "/home/u/GenCAD/trainer/ccip_trainer.py", line 164, in train',
            "    val_loss = self.val_one_epoch(val_loader)",
            '  File "/home/u/GenCAD/trainer/ccip_trainer.py", line 77, in val_one_epoch',
            "    loss = self.model(batch_cad, batch_image, return_loss=True, freeze_cad_encoder=True)",
            '  File "/opt/env/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl',
            "    return self._call_impl(*args, **kwargs)",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.traceback_cut and not f.oom
    assert f.phase == "eval"


def test_nemo_rls_loss_frames_are_the_steps_loss_over_the_logits() -> None:
    root = "/opt/nemo-rl/nemo_rl"
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            f'  File "{root}/models/policy/megatron_policy_worker.py", line 880, in train',
            "    loss, metrics = loss_fn(output_tensor, data)",
            f'  File "{root}/algorithms/loss_functions.py", line 512, in __call__',
            "    next_token_logprobs = prepare_loss_input(logits, data)",
            f'  File "{root}/distributed/model_utils.py", line 1383, in get_next_token_logprobs_from_logits',
            "    return from_parallel_logits_to_logprobs(logits, labels)",
            f'  File "{root}/distributed/model_utils.py", line 59, in _compute_distributed_log_softmax',
            "    sum_exp_logits = vocab_parallel_logits.exp().sum(-1, keepdim=True).float()",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.60 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 12.44 GiB is free.",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.phase == "first_batch"
    assert "_compute_distributed_log_softmax" in f.frames


def test_a_sentence_with_the_words_allocation_on_device_is_no_oom() -> None:
    assert not parse_log_text("Allocation on device memory is handled by the caching allocator\n").oom
