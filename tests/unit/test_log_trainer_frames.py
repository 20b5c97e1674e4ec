"""The frames of trainers beyond LLaMA-Factory and the HF Trainer (facts/log_markers.yaml), each on the shape of
a real traceback from a public thread (paths shortened, the source named above each excerpt)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.15 GiB. GPU 0 has a total capacity of "
    "23.68 GiB of which 188.75 MiB is free. Including non-PyTorch memory, this process has 23.34 GiB memory in use. "
    "Of the allocated memory 21.83 GiB is allocated by PyTorch, and 1.07 GiB is reserved by PyTorch but unallocated."
)


def frames(*lines: tuple[str, str, str]) -> str:
    out = ["Traceback (most recent call last):"]
    for path, func, code in lines:
        out += [f'  File "{path}", line 1, in {func}', f"    {code}"]
    return "\n".join(out) + "\n" + OOM + "\n"


def evidence(text: str) -> str:
    return " | ".join(parse_log_text(text).phase_evidence)


TRAIN = ("/site-packages/transformers/trainer.py", "training_step", "loss = self.compute_loss(model, inputs)")

# dhcode-cpp/X-R1#14: GRPO under ZeRO-3 on A10s, out of memory while ZeRO-3 gathers a layer in compute_loss.
GRPO_ZERO3_GATHER = frames(
    TRAIN,
    (
        "/site-packages/trl/trainer/grpo_trainer.py",
        "compute_loss",
        "per_token_logps = get_per_token_logps(model, ids)",
    ),
    ("/site-packages/torch/nn/modules/module.py", "_call_impl", "return inner()"),
    (
        "/site-packages/deepspeed/runtime/zero/parameter_offload.py",
        "pre_sub_module_forward_function",
        "param_coordinator.fetch_sub_module(sub_module, forward=True)",
    ),
    (
        "/site-packages/deepspeed/runtime/zero/partitioned_param_coordinator.py",
        "fetch_sub_module",
        "self.__all_gather_params(params_to_fetch, forward)",
    ),
)


def test_zero3_gather_tells_the_phase_not_the_cause() -> None:
    f = parse_log_text(GRPO_ZERO3_GATHER)
    assert f.phase == "first_batch"
    assert "tells the phase" in evidence(GRPO_ZERO3_GATHER) and "not the cause" in evidence(GRPO_ZERO3_GATHER)


# om-ai-lab/VLM-R1#152: GRPO generating its completions (unwrap_model_for_generation, then generate).
GRPO_ROLLOUT = frames(
    TRAIN,
    (
        "/open_r1/trainer/grpo_trainer.py",
        "compute_loss",
        "inputs = self._generate_and_score_completions(inputs)",
    ),
    (
        "/open_r1/trainer/grpo_trainer.py",
        "_generate_and_score_completions",
        "with unwrap_model_for_generation(model, self.accelerator) as unwrapped_model:",
    ),
    ("/site-packages/transformers/generation/utils.py", "generate", "result = self._sample("),
    (
        "/site-packages/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py",
        "forward",
        "outputs = self.model(",
    ),
)


def test_a_generate_inside_an_rl_rollout_is_the_training_step_not_evaluation() -> None:
    f = parse_log_text(GRPO_ROLLOUT)
    assert f.phase == "first_batch"
    assert "RL training step" in evidence(GRPO_ROLLOUT)


# huggingface/trl#2250 (RLOO): OOM while unwrapping the ZeRO-3 model for generation in a training step.
RLOO_UNWRAP = frames(
    (
        "/export/trainer/trainer_simple_rloo.py",
        "train",
        "with torch.no_grad(), unwrap_model_for_generation(model, self.accelerator) as unwrapped_model:",
    ),
    (
        "/site-packages/trl/models/utils.py",
        "unwrap_model_for_generation",
        "with deepspeed.zero.GatheredParameters(model.parameters()):",
    ),
    (
        "/site-packages/deepspeed/runtime/zero/partition_parameters.py",
        "_all_gather",
        "self._allgather_params(p)",
    ),
    (
        "/site-packages/deepspeed/runtime/zero/partition_parameters.py",
        "_allgather_params",
        "flat_tensor = torch.zeros(tensor_size, dtype=dtype, device=device)",
    ),
)


def test_gathering_the_whole_model_for_generation_names_the_gathered_weights() -> None:
    f = parse_log_text(RLOO_UNWRAP)
    assert f.phase in ("first_batch", "long_sample")
    assert "gathered copy of the weights" in evidence(RLOO_UNWRAP)


# deepspeedai/DeepSpeed#1624: "OOM at Allgather in pre-submodule", ZeRO-3, second iteration.
DS_ALLGATHER = (
    "{'loss': 9.87, 'learning_rate': 1e-05, 'epoch': 0.01}\n"
    '  File "/site-packages/torch/distributed/distributed_c10d.py", line 1432, in all_gather\n'
    "    work = _default_pg.allgather([tensor_list], [tensor])\n"
    "RuntimeError: CUDA out of memory. Tried to allocate 274.00 MiB (GPU 1; 23.70 GiB total capacity; 21.95 GiB "
    "already allocated; 25.69 MiB free; 22.28 GiB reserved in total by PyTorch)\n"
)


def test_an_all_gather_of_sharded_parameters_is_a_step_of_unknown_cause() -> None:
    f = parse_log_text(DS_ALLGATHER)
    assert f.phase == "long_sample"
    assert "all-gather of sharded parameters" in evidence(DS_ALLGATHER)


# FSDP's forward unshard path, frames as torch prints them (torch/distributed/fsdp/_runtime_utils.py).
FSDP_UNSHARD = frames(
    TRAIN,
    (
        "/site-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py",
        "forward",
        "args, kwargs = _pre_forward(self, handle, _pre_forward_unshard, self._fsdp_wrapped_module, args, kwargs)",
    ),
    (
        "/site-packages/torch/distributed/fsdp/_runtime_utils.py",
        "_pre_forward_unshard",
        "_unshard(state, handle)",
    ),
    ("/site-packages/torch/distributed/fsdp/_runtime_utils.py", "_unshard", "handle.unshard()"),
    (
        "/site-packages/torch/distributed/fsdp/_flat_param.py",
        "unshard",
        "padded = self._alloc_padded_unsharded()",
    ),
)


def test_fsdp_unshard_tells_the_phase_not_the_cause() -> None:
    assert parse_log_text(FSDP_UNSHARD).phase == "first_batch"
    assert "FSDP un-sharding" in evidence(FSDP_UNSHARD)


# tests/cases/logs/deepspeed_zero2_optimizer_init.log (a LLaMA-Factory ZeRO-2 run): initialise, not an update.
DS_INIT = frames(
    (
        "/site-packages/deepspeed/__init__.py",
        "initialize",
        "engine = DeepSpeedEngine(args=args, model=model)",
    ),
    (
        "/site-packages/deepspeed/runtime/engine.py",
        "_configure_zero_optimizer",
        "optimizer = DeepSpeedZeroOptimizer(",
    ),
    (
        "/site-packages/deepspeed/runtime/zero/stage_1_and_2.py",
        "initialize_optimizer_states",
        "self.single_partition_of_fp32_groups[i].grad = torch.zeros_like(",
    ),
)
DS_INIT_MOVE = frames(
    (
        "/site-packages/deepspeed/__init__.py",
        "initialize",
        "engine = DeepSpeedEngine(args=args, model=model)",
    ),
    ("/site-packages/deepspeed/runtime/engine.py", "__init__", "self._configure_distributed_model(model)"),
    (
        "/site-packages/deepspeed/runtime/engine.py",
        "_configure_distributed_model",
        "self.module.to(self.device)",
    ),
    ("/site-packages/torch/nn/modules/module.py", "to", "return self._apply(convert)"),
)


def test_deepspeed_initialise_is_not_an_optimizer_update() -> None:
    f = parse_log_text(DS_INIT)
    # set-up before any step (issue 8 item 4); what it allocates is the optimizer's state
    assert f.phase == "load" and f.setup_step == "optimizer_init"
    assert "not an optimizer update" in evidence(DS_INIT)
    assert parse_log_text(DS_INIT_MOVE).phase == "load"


# A public transformers/bitsandbytes traceback: Int8Params.to -> cuda -> double_quant while loading.
BNB_QUANTISE = frames(
    (
        "/site-packages/transformers/utils/bitsandbytes.py",
        "set_module_8bit_tensor_to_device",
        "new_value = bnb.nn.Int8Params(new_value, requires_grad=False).to(device)",
    ),
    ("/site-packages/bitsandbytes/nn/modules.py", "to", "return self.cuda(device)"),
    (
        "/site-packages/bitsandbytes/nn/modules.py",
        "cuda",
        "CB, CBt, SCB, SCBt, coo_tensorB = bnb.functional.double_quant(B)",
    ),
)


def test_bitsandbytes_quantising_while_loading_is_load() -> None:
    f = parse_log_text(BNB_QUANTISE)
    assert f.phase == "load" and "bitsandbytes quantising" in evidence(BNB_QUANTISE)


# modelscope/ms-swift#5943 (gemma3-27b, rlhf): swift's own training run.
SWIFT_RUN = frames(
    ("/ms-swift/swift/llm/train/sft.py", "train", "trainer.train(trainer.args.resume_from_checkpoint)"),
    ("/ms-swift/swift/trainers/mixin.py", "train", "res = super().train(*args, **kwargs)"),
    ("/site-packages/torch/nn/modules/module.py", "_call_impl", "return forward_call(*args, **kwargs)"),
)
SWIFT_LOAD = frames(
    ("/ms-swift/swift/llm/train/sft.py", "__init__", "self._prepare_model_tokenizer()"),
    (
        "/ms-swift/swift/llm/model/register.py",
        "get_model_tokenizer",
        "model, processor = get_function(model_dir)",
    ),
    ("/site-packages/torch/nn/modules/module.py", "to", "return self._apply(convert)"),
)


def test_ms_swift_training_and_loading() -> None:
    assert parse_log_text(SWIFT_RUN).phase == "first_batch" and "ms-swift's training run" in evidence(
        SWIFT_RUN
    )
    assert parse_log_text(SWIFT_LOAD).phase == "load"


# axolotl-ai-cloud/axolotl (a public [rank0] traceback): do_cli -> do_train -> train.
AXOLOTL_TRAIN = frames(
    ("/axolotl/src/axolotl/cli/train.py", "do_train", "return train(cfg=cfg, cli_args=cli_args)"),
    (
        "/axolotl/src/axolotl/train.py",
        "train",
        "trainer.train(resume_from_checkpoint=resume_from_checkpoint)",
    ),
    ("/site-packages/transformers/models/llama/modeling_llama.py", "forward", "hidden_states = self.mlp(x)"),
)
AXOLOTL_LOAD = frames(
    ("/axolotl/cli/train.py", "main", "trainer = get_trainer(cfg)"),
    ("/axolotl/train.py", "get_trainer", "model = get_model(cfg, tokenizer)"),
    ("/axolotl/utils/models.py", "get_model", "model = AutoModelForCausalLM.from_config(config)"),
)


def test_axolotl_training_and_loading() -> None:
    assert parse_log_text(AXOLOTL_TRAIN).phase == "first_batch"
    assert "axolotl's training run" in evidence(AXOLOTL_TRAIN)
    assert parse_log_text(AXOLOTL_LOAD).phase == "load"


# unslothai/unsloth: the loss kernel (unsloth/kernels/cross_entropy_loss.py, as printed in a public traceback).
UNSLOTH_LOSS = frames(
    ("/src/model/losses.py", "compute_sft_loss", "loss = fast_cross_entropy_loss(shift_logits, _labels)"),
    (
        "/site-packages/unsloth/kernels/cross_entropy_loss.py",
        "fast_cross_entropy_loss",
        "logits.view(batch * seq_len, d),",
    ),
)


def test_unsloth_loss_kernel_is_the_logits() -> None:
    f = parse_log_text(UNSLOTH_LOSS)
    assert "fast_cross_entropy_loss" in f.frames and "logits" in evidence(UNSLOTH_LOSS)


# pytorch/torchtune recipes: FullFinetuneRecipeSingleDevice.train -> _loss_step; _setup_model at start-up.
TORCHTUNE_STEP = frames(
    (
        "/site-packages/recipes/full_finetune_single_device.py",
        "train",
        "current_loss = self._loss_step(batch)",
    ),
    (
        "/site-packages/recipes/full_finetune_single_device.py",
        "_loss_step",
        "loss = self._loss_fn(logits, labels)",
    ),
    (
        "/site-packages/torchtune/modules/loss/ce_chunked_output_loss.py",
        "forward",
        "total_loss += self.compute_cross_entropy(",
    ),
)
TORCHTUNE_SETUP = frames(
    ("/site-packages/recipes/lora_finetune_single_device.py", "setup", "self._model = self._setup_model("),
    (
        "/site-packages/recipes/lora_finetune_single_device.py",
        "_setup_model",
        "model.load_state_dict(base_model_state_dict)",
    ),
)


def test_torchtune_loss_step_and_setup() -> None:
    f = parse_log_text(TORCHTUNE_STEP)
    assert f.phase == "first_batch" and "torchtune" in evidence(TORCHTUNE_STEP)
    assert parse_log_text(TORCHTUNE_SETUP).phase == "load"


# OpenRLHF (the LightRFT fork's [rank2] traceback): make_experience_list -> generate_samples, under Ray.
OPENRLHF_ROLLOUT = "\n".join(
    f"(PolicyModelActor pid=812, ip=10.0.0.5) {line}"
    for line in frames(
        (
            "/openrlhf/trainer/ppo_trainer.py",
            "fit",
            "experience_list = self.experience_maker.make_experience_list(",
        ),
        (
            "/openrlhf/trainer/ppo_utils/experience_maker.py",
            "make_experience_list",
            "samples_list = self.generate_samples(all_prompts, **generate_kwargs)",
        ),
        ("/site-packages/transformers/generation/utils.py", "generate", "result = self._sample("),
    ).splitlines()
)


def test_openrlhf_rollout_under_ray_is_the_training_step() -> None:
    f = parse_log_text(OPENRLHF_ROLLOUT)
    assert f.oom and f.phase == "first_batch"
    assert f.host == "pid812"
    assert "RL training step" in evidence(OPENRLHF_ROLLOUT)


# huggingface/trl DPO: the chosen and rejected logits (concatenated_forward -> selective_log_softmax).
DPO_LOGPS = frames(
    TRAIN,
    (
        "/site-packages/trl/trainer/dpo_trainer.py",
        "concatenated_forward",
        "per_token_logps = selective_log_softmax(",
    ),
    (
        "/site-packages/trl/trainer/utils.py",
        "selective_log_softmax",
        "logsumexp_values = torch.stack([torch.logsumexp(",
    ),
)


def test_trl_log_probabilities_are_the_loss_over_logits() -> None:
    f = parse_log_text(DPO_LOGPS)
    assert f.phase == "first_batch" and "selective_log_softmax" in f.frames
    assert "logits" in evidence(DPO_LOGPS)


# Sure or asking: a loading marker printed after training steps had completed (a reference or reward model
# loaded mid-run, an adapter reload) disagrees with the step counter. The reader does not pick one.
def test_a_load_marker_after_completed_steps_is_asked_not_guessed() -> None:
    text = (
        "  5%|▌         | 30/600 [02:10<41:00,  4.32s/it]\n"
        "[INFO|modeling_utils.py:748] 2026-11-12 14:03:15,971 >> loading weights file /models/reward/model.safetensors\n"
        + OOM
        + "\n"
    )
    f = parse_log_text(text)
    assert f.oom and f.phase == "unknown"
    assert "disagree" in evidence(text)


# pytorch/pytorch#16558 (an address-space limit, `ulimit -v`): the import itself cannot map a library.
def test_failing_to_map_a_library_at_import_is_host_memory_while_loading() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 1, in <module>\n'
        "    import torch\n"
        "OSError: /site-packages/torch/lib/libtorch_cuda.so: failed to map segment from shared object\n"
    )
    f = parse_log_text(text)
    assert f.oom and f.ran_out_of == "host" and f.phase == "load"


# pytorch/pytorch#4387: the DataLoader cannot fork its workers (ENOMEM) in the middle of training.
def test_a_dataloader_fork_without_memory_is_host_ram_in_training() -> None:
    text = (
        "{'loss': 1.42, 'learning_rate': 2e-05, 'epoch': 0.4}\n"
        "Traceback (most recent call last):\n"
        '  File "/site-packages/torch/utils/data/dataloader.py", line 1039, in __init__\n'
        "    w.start()\n"
        '  File "/usr/lib/python3.10/multiprocessing/popen_fork.py", line 66, in _launch\n'
        "    self.pid = os.fork()\n"
        "OSError: [Errno 12] Cannot allocate memory\n"
    )
    f = parse_log_text(text)
    assert f.oom and f.ran_out_of == "host" and f.phase == "long_sample"
    assert "DataLoader" in evidence(text)


# hiyouga/LLaMA-Factory reward-model run under ZeRO-3: out of memory while the trainer is being built.
def test_building_the_trainer_is_loading() -> None:
    text = frames(
        ("/LLaMA-Factory/src/llamafactory/train/rm/workflow.py", "run_rm", "trainer = PairwiseTrainer("),
        ("/LLaMA-Factory/src/llamafactory/train/rm/trainer.py", "__init__", "super().__init__(**kwargs)"),
        (
            "/site-packages/transformers/trainer.py",
            "__init__",
            "self._move_model_to_device(model, args.device)",
        ),
    )
    f = parse_log_text(text)
    assert f.phase == "load" and "Trainer being built" in evidence(text)


# deepspeedai/DeepSpeed (OPT-66B with init_inference on 8 x V100): the inference engine placing the weights.
def test_deepspeed_inference_engine_is_loading() -> None:
    text = frames(
        (
            "/site-packages/deepspeed/__init__.py",
            "init_inference",
            "engine = InferenceEngine(model, config=ds_config)",
        ),
        ("/site-packages/deepspeed/inference/engine.py", "__init__", "self.module.to(device)"),
    )
    assert parse_log_text(text).phase == "load"
