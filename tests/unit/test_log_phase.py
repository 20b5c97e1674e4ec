"""When memory ran out: frames, markers and step counters, one behaviour per test (parse_log_text)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.17 GiB. GPU 0 has a total capacity of "
    "31.74 GiB of which 1.32 GiB is free. Including non-PyTorch memory, this process has 30.41 GiB memory in use. "
    "Of the allocated memory 26.02 GiB is allocated by PyTorch, and 3.87 GiB is reserved by PyTorch but unallocated."
)
SP = "/env/lib/python3.11/site-packages"
RUNNING = "[INFO|trainer.py:1469] 2026-11-12 14:03:18,812 >> ***** Running training *****"
TOTAL = "[INFO|trainer.py:1478] 2026-11-12 14:03:18,812 >>   Total optimization steps = 50"


def frames(*pairs: tuple[str, str], code: str | None = None) -> list[str]:
    """Traceback lines for (path, function) pairs, outermost first."""
    out = ["Traceback (most recent call last):"]
    for path, func in pairs:
        out += [f'  File "{path}", line 1, in {func}', f"    {code or 'x = f()'}"]
    return out


def bar(n: int, total: int = 50) -> str:
    return f" {int(100 * n / total):2d}%|███       | {n}/{total} [00:10<00:50,  6.02s/it]"


def log(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_training_frames_after_good_steps_is_long_sample() -> None:
    text = log(
        RUNNING,
        TOTAL,
        "\r" + bar(0) + "\r" + bar(1) + "\r" + bar(29),
        *frames(
            (f"{SP}/transformers/trainer.py", "training_step"),
            (f"{SP}/torch/nn/functional.py", "cross_entropy"),
        ),
        OOM,
    )
    f = parse_log_text(text)
    assert (f.oom, f.oom_kind, f.phase, f.good_steps, f.step, f.total_steps) == (
        True,
        "cuda_oom",
        "long_sample",
        29,
        30,
        50,
    )
    assert f.phase_confidence == "high"
    assert any("cross_entropy" in e for e in f.phase_evidence)
    assert f.frames == ["training_step", "cross_entropy"]


def test_zero_of_n_progress_is_first_batch_at_step_one() -> None:
    text = log(
        RUNNING,
        "  0%|          | 0/30 [00:00<?, ?it/s]Traceback (most recent call last):",
        f'  File "{SP}/transformers/trainer.py", line 1, in training_step',
        "    loss.backward()",
        OOM,
    )
    f = parse_log_text(text)
    assert (f.phase, f.step, f.good_steps, f.phase_confidence) == ("first_batch", 1, 0, "high")


def test_loss_frame_with_no_step_information_is_a_low_confidence_first_batch() -> None:
    f = parse_log_text(
        log("line 3479, in cross_entropy", "    return torch._C._nn.cross_entropy_loss(", "", OOM)
    )
    assert (f.phase, f.phase_confidence, f.step) == ("first_batch", "low", 1)


def test_varlen_backward_with_steps_done_is_long_sample_without_is_first_batch() -> None:
    tb = [
        f'  File "{SP}/flash_attn/flash_attn_interface.py", line 165, in _flash_attn_varlen_backward',
        "    dq, dk, dv, softmax_d, = flash_attn_cuda.varlen_bwd(",
    ]
    with_steps = parse_log_text(log("\r" + bar(12, 400), *tb, OOM))
    assert (with_steps.phase, with_steps.step) == ("long_sample", 13)
    assert parse_log_text(log(*tb, OOM)).phase == "first_batch"


def test_innermost_context_frame_wins() -> None:
    in_eval = frames(
        (f"{SP}/transformers/trainer.py", "_inner_training_loop"),
        (f"{SP}/transformers/trainer.py", "evaluate"),
        (f"{SP}/transformers/trainer.py", "evaluation_loop"),
        (f"{SP}/torch/nn/modules/module.py", "forward"),
    )
    assert parse_log_text(log(*in_eval, OOM)).phase == "eval"
    in_save = frames(
        (f"{SP}/transformers/trainer.py", "_inner_training_loop"),
        (f"{SP}/transformers/trainer.py", "_save_checkpoint"),
        (f"{SP}/deepspeed/runtime/engine.py", "_zero3_consolidated_16bit_state_dict"),
    )
    assert parse_log_text(log(*in_save, OOM)).phase == "save"
    zero_init = frames(
        (f"{SP}/transformers/trainer.py", "train"), (f"{SP}/deepspeed/runtime/zero/stage3.py", "__init__")
    )
    assert (
        parse_log_text(log(*zero_init, OOM)).phase == "load"
    )  # ZeRO's optimizer built: set-up, before any step
    load = frames(
        (f"{SP}/llamafactory/train/sft/workflow.py", "run_sft"),
        (f"{SP}/llamafactory/model/loader.py", "load_model"),
        (f"{SP}/torch/nn/modules/module.py", "_apply"),
    )
    assert parse_log_text(log(*load, OOM)).phase == "load"


def test_source_line_beats_a_neutral_function() -> None:
    """A frame of the user's own script is read by the call it was making."""
    tb = frames(("train.py", "main"), code="trainer.evaluate()")
    assert parse_log_text(log(*tb, OOM)).phase == "eval"
    tb = frames(("run.py", "main"), code="model = load_model(tokenizer, model_args)")
    assert parse_log_text(log(*tb, OOM)).phase == "load"


def test_softmax_in_an_evaluate_script_is_eval_bare_softmax_is_unknown() -> None:
    softmax = [
        f'  File "{SP}/torch/nn/functional.py", line 1860, in softmax',
        "    ret = input.softmax(dim, dtype=dtype)",
    ]
    in_eval_script = [
        '  File "/root/LLaMA-Factory/src/evaluate.py", line 10, in <module>',
        "    main()",
        *softmax,
    ]
    assert parse_log_text(log(*in_eval_script, OOM)).phase == "eval"
    bare = parse_log_text(log(*softmax, OOM))
    assert (bare.phase, bare.phase_confidence) == ("unknown", "low")


def test_forward_after_a_deepspeed_engine_was_set_up_is_training() -> None:
    text = log(
        "gpu-q-13: ret = input.softmax(dim, dtype=dtype)",
        "gpu-q-13: " + OOM.replace("GPU 0", "GPU 2"),
        "MA 0.0 GB         Max_MA 0.0 GB         CA 55.83 GB         Max_CA 56 GB",
    )
    f = parse_log_text(text)
    assert (f.phase, f.host, f.gpu_index) == ("first_batch", "gpu-q-13", 2)


def test_markers_decide_when_there_is_no_traceback() -> None:
    eval_marker = log(
        RUNNING,
        TOTAL,
        "\r" + bar(25),
        "***** Running Evaluation *****",
        "\r  0%|          | 0/25 [00:00<?, ?it/s]\r 12%|█▏        | 3/25 [00:02<00:17,  1.28it/s]",
        OOM,
    )
    f = parse_log_text(eval_marker)
    assert (f.phase, f.step, f.eval_started) == ("eval", 25, True)
    saving = log(
        RUNNING,
        TOTAL,
        "\r" + bar(50),
        "[INFO|trainer.py:3815] >> Saving model checkpoint to out/checkpoint-50",
        OOM,
    )
    f = parse_log_text(saving)
    assert (f.phase, f.saving) == ("save", True)
    zero = log("[INFO] [logging.py:96:log_dist] [Rank 0] Creating BF16 ZeRO stage 2 optimizer", OOM)
    assert (parse_log_text(zero).phase, parse_log_text(zero).setup_step) == ("load", "optimizer_init")
    loading = log("Loading checkpoint shards:  50%|█████     | 2/4 [00:09<00:09,  4.5s/it]", OOM)
    f = parse_log_text(loading)
    assert (f.phase, f.loading_shards, f.weights_loaded) == ("load", True, False)
    nothing = parse_log_text(log(OOM))
    assert (nothing.phase, nothing.step) == ("unknown", None)


def test_a_finished_eval_returns_the_context_to_training() -> None:
    text = log(
        RUNNING,
        TOTAL,
        "\r" + bar(25),
        "***** Running Evaluation *****",
        "\r  0%|          | 0/25 [00:00<?, ?it/s]\r100%|██████████| 25/25 [00:10<00:00,  2.4it/s]",
        "{'eval_loss': '1.234', 'eval_runtime': '10.1', 'epoch': '0.5'}",
        "\r" + bar(26),
        OOM,
    )
    f = parse_log_text(text)
    assert (f.phase, f.good_steps, f.eval_loss) == ("long_sample", 26, 1.234)


def test_eval_bars_do_not_count_as_training_steps() -> None:
    text = log(
        RUNNING,
        TOTAL,
        "\r" + bar(10),
        "***** Running Evaluation *****",
        "\r 40%|████      | 10/25 [00:04<00:06,  2.4it/s]",
        OOM,
    )
    f = parse_log_text(text)
    assert (f.phase, f.good_steps, f.total_steps) == ("eval", 10, 50)


def test_killed_after_a_progress_bar() -> None:
    mid = parse_log_text(log(RUNNING, "\r" + bar(117, 6000) + "\r" + bar(123, 6000) + "Killed"))
    assert (mid.oom_kind, mid.ran_out_of, mid.phase, mid.step) == ("killed", "host", "unknown", 124)
    at_save_step = parse_log_text(
        log("\r" + bar(1000, 6060), "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 44150")
    )
    assert (at_save_step.phase, at_save_step.phase_confidence, at_save_step.step) == ("save", "low", 1000)


def test_launcher_kill_after_a_python_error_is_not_an_oom() -> None:
    text = log(
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "    main()",
        "ValueError: bad value",
        "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 12",
    )
    f = parse_log_text(text)
    assert (f.oom, f.phase, f.other_error) == (False, "none", "ValueError: bad value")
    assert any("Killing subprocess" in w for w in f.warnings)


def test_cuda_oom_beats_the_kill_that_follows_it() -> None:
    text = log(
        RUNNING,
        "\r" + bar(3),
        *frames((f"{SP}/transformers/trainer.py", "training_step")),
        OOM,
        "E1103 api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 1) of binary: python",
        "[INFO] [launch.py:315:sigkill_handler] Killing subprocess 99",
    )
    f = parse_log_text(text)
    assert (f.oom_kind, f.requested_mib) == ("cuda_oom", 2222.08)


def test_first_failing_rank_is_reported() -> None:
    text = log("[rank1]: " + OOM.replace("GPU 0", "GPU 1"), "[rank0]: " + OOM.replace("2.17 GiB", "1.00 GiB"))
    f = parse_log_text(text)
    assert (f.rank, f.gpu_index, f.requested_mib) == (1, 1, 2222.08)


def test_cut_traceback_gives_the_phase_but_not_an_oom() -> None:
    text = log(
        *frames(
            (f"{SP}/llamafactory/train/sft/workflow.py", "run_sft"),
            (f"{SP}/llamafactory/model/loader.py", "load_model"),
        ),
        "[...]",
    )
    f = parse_log_text(text)
    assert (f.oom, f.traceback_cut, f.phase, f.error_line) == (False, True, "load", None)


def test_raise_line_inside_a_traceback_is_code_not_the_error() -> None:
    text = log(
        RUNNING,
        *frames((f"{SP}/accelerate/utils/memory.py", "decorator")),
        '    raise RuntimeError("No executable batch size found, reached zero.")',
        "RuntimeError: No executable batch size found, reached zero.",
    )
    f = parse_log_text(text)
    assert f.error_line == "RuntimeError: No executable batch size found, reached zero."
    assert (f.oom_kind, f.phase) == ("no_executable_batch", "first_batch")


def test_a_restart_in_the_same_file_reports_the_last_failed_run() -> None:
    first = log(
        "[INFO|x] llamafactory.hparams.parser:406 >> Process rank: 0, world size: 1, device: cuda:0",
        RUNNING,
        "  0%|          | 0/50 [00:00<?, ?it/s]",
        OOM,
    )
    second = log(
        "[INFO|x] llamafactory.hparams.parser:406 >> Process rank: 0, world size: 1, device: cuda:0",
        RUNNING,
        TOTAL,
        "\r" + bar(20),
        "***** Running Evaluation *****",
        OOM.replace("2.17 GiB", "3.00 GiB"),
    )
    f = parse_log_text(first + second)
    assert (f.runs_seen, f.phase, f.requested_mib) == (2, "eval", 3072.0)
    still_running = parse_log_text(
        first
        + log(
            "[INFO|x] llamafactory.hparams.parser:406 >> Process rank: 0, world size: 1",
            RUNNING,
            "\r" + bar(3),
        )
    )
    assert (still_running.phase, still_running.runs_seen, still_running.requested_mib) == (
        "first_batch",
        2,
        2222.08,
    )
    assert any("2 runs" in e for e in still_running.phase_evidence)


def test_banner_facts() -> None:
    text = log(
        "[INFO|2026-11-12 14:03:09] llamafactory.hparams.parser:523 >> Process rank: 0, world size: 2, device: cuda:0",
        "[INFO|2026-11-12 14:03:17] llamafactory.model.model_utils.checkpointing:144 >> Gradient checkpointing enabled.",
        "[INFO|2026-11-12 14:03:17] llamafactory.model.loader:144 >> trainable params: 5,046,272 || all params: 601,096,192 || trainable%: 0.8395",
        RUNNING,
        "[INFO|trainer.py:1470] >>   Num examples = 1,600",
        "[INFO|trainer.py:1473] >>   Instantaneous batch size per device = 4",
        "[INFO|trainer.py:1476] >>   Total train batch size (w. parallel, distributed & accumulation) = 32",
        "[INFO|trainer.py:1477] >>   Gradient Accumulation steps = 8",
        TOTAL,
        "{'loss': '8.283', 'grad_norm': '1.2', 'learning_rate': '5e-05', 'epoch': '0.1'}",
        "***** Running Evaluation *****",
        "[INFO|trainer.py:2670] >>   Num examples = 200",
        "{'eval_loss': 1.5, 'epoch': 0.2}",
        "{'loss': 7.5, 'learning_rate': 4e-05, 'epoch': 0.3}",
        "{'train_runtime': '300.54', 'train_samples_per_second': '5.3', 'train_loss': '1.2', 'epoch': '1.0'}",
    )
    f = parse_log_text(text)
    assert (f.world_size, f.gradient_checkpointing_logged, f.trainable_params, f.all_params) == (
        2,
        True,
        5046272,
        601096192,
    )
    assert (f.num_examples, f.instantaneous_batch_size, f.total_train_batch_size) == (1600, 4, 32)
    assert (f.gradient_accumulation_steps, f.total_steps) == (8, 50)
    assert (f.last_loss, f.eval_loss, f.train_runtime_s) == (7.5, 1.5, 300.54)
    assert (f.oom, f.phase, f.training_started, f.eval_started) == (False, "none", True, True)


def test_allocator_warnings_are_counted() -> None:
    text = log(
        "[WARNING] [stage3.py:2139:step] 4 pytorch allocator cache flushes since last step. this happen when there is high memory pressure",
        "[WARNING] [stage3.py:2139:step] 2 pytorch allocator cache flushes since last step. this happen when there is high memory pressure",
        "|       cudaMalloc retries: 7         |",
    )
    f = parse_log_text(text)
    assert f.alloc_retries == 4 + 2 + 7
    assert len(f.warnings) == 3


def test_evidence_is_in_both_languages() -> None:
    f = parse_log_text(
        log(RUNNING, "\r" + bar(4), *frames((f"{SP}/transformers/trainer.py", "training_step")), OOM)
    )
    assert f.phase_evidence == [e["en"] for e in f.phase_evidence_text]
    assert all(e["zh"] and e["zh"] != e["en"] for e in f.phase_evidence_text)


def test_a_log_without_oom_is_valid() -> None:
    f = parse_log_text(log(RUNNING, TOTAL, "\r" + bar(5), "{'loss': '2.0', 'epoch': '0.1'}"))
    assert (f.oom, f.oom_kind, f.phase, f.good_steps, f.step, f.phase_evidence) == (
        False,
        None,
        "none",
        5,
        None,
        [],
    )


def test_torch_elastic_error_file_summary() -> None:
    """With @record, torchrun's summary carries the child's traceback indented under "traceback :"."""
    text = log(
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : 1 (pid: 1234)",
        "  traceback : Traceback (most recent call last):",
        f'    File "{SP}/transformers/trainer.py", line 1909, in training_step',
        "      loss = self.compute_loss(model, inputs)",
        "  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.15 GiB",
    )
    f = parse_log_text(text)
    assert (f.oom_kind, f.phase, f.requested_mib, f.frames) == (
        "cuda_oom",
        "first_batch",
        1024.0,
        ["training_step"],
    )
