"""The reporter's own words for an out-of-memory beside a bare log (facts/log_markers.yaml, the oom forms added by
fix10a): the class name in odd capitals, "提示OOM" / "显存不足", the host's RAM said to reach 100 %, and torch's
"Allocation on device" wording as ComfyUI prints it. Excerpts from real public threads (LLaMA-Factory, ms-swift,
ComfyUI-FluxTrainer)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

CUT_AT_LOADING = "\n".join(
    [
        "运行时，提示OOM的错误，信息如下：",
        "Loading checkpoint shards:  55%|█████▊     | 6/11 [00:08<00:06,  1.40s/it]",
        "Traceback (most recent call last):",
        '  File "/root/autodl-tmp/LLaMA-Factory/src/train_bash.py", line 14, in <module>',
        "    main()",
        "[...]",
    ]
)


def test_the_reporters_oom_words_before_a_cut_traceback_are_the_gpu_oom_at_loading() -> None:
    f = parse_log_text(CUT_AT_LOADING + "\n")
    assert f.oom and f.ran_out_of == "gpu" and not f.traceback_cut
    assert f.phase == "load"


def test_the_class_name_in_odd_capitals_inside_a_sentence_is_a_gpu_oom() -> None:
    line = (
        "通过设置device_map，把模型分布式加载到3块显存中，发现模型在训练过程中会出现内存溢出，在return "
        "torch._c.nn.cross_entropy(inputs, target, weight, ...处报错，torch.cuda.OutofMemoryError问题"
    )
    f = parse_log_text(line + "\n")
    assert f.oom and f.oom_kind == "cuda_oom" and f.ran_out_of == "gpu"


def test_the_message_after_the_reporters_words_is_the_failure_with_its_numbers() -> None:
    log = "\n".join(
        [
            "单卡 A800 80G 显存 export Qwen2.5-VL-32B 的 Lora 时报显存不足，Lora rank=512",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 0 has a total capacity of "
            "79.33 GiB of which 81.81 MiB is free.",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.requested_mib == 270.0 and f.free_mib == 81.81


def test_the_host_ram_said_full_beside_a_bare_sigterm_line_is_a_host_memory_kill() -> None:
    log = "\n".join(
        [
            "在训练过程中，显示一共需要的时间很长。并且会看到**内存在线性上升**，最终不可回收内存达到100%然后程序终止。",
            "最终`torch/distributed/elastic/multiprocessing/api.py:897] Sending process 3802 closing signal SIGTERM`。",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.ran_out_of == "host"


def test_the_cards_memory_is_not_the_hosts_and_a_steady_figure_is_no_oom() -> None:
    log = "\n".join(
        [
            "显存占用100%，但是训练正常进行",
            "GPU内存占用100%，显卡内存也是100%",
            "训练时并没有报OOM，也不是显存不足，而是loss变成了nan",
            "模型在训练过程中，是否存在显存占用累加。因为在训练过程中，发现显存占用是个固定值",
        ]
    )
    f = parse_log_text(log + "\n")
    assert not f.oom


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


def test_the_reporters_words_place_a_bare_launcher_kill_in_the_datas_loading() -> None:
    log = "\n".join(
        [
            "机器内存共900G，在使用上述脚本执行后，加载数据阶段就会内存溢出，报错退出，报错信息如下：",
            "> E0721 20:54:31.520000 140161827444544 torch/distributed/elastic/multiprocessing/api.py:826] failed "
            "(exitcode: -9) local_rank: 0 (pid: 2330) of binary: /python",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.ran_out_of == "host" and f.phase == "load"
    # the same kill without the sentence: nothing says where
    assert parse_log_text(log.split("\n", 1)[1] + "\n").phase != "load"
