"""Frames that place a failure printed outside its own traceback (issue 8 item 3): the rest of the traceback
printed right after the error line when two writers interleave, and the traceback of another rank that the
log ends in. Read only when the failure's own frames tell nothing. Excerpts from real threads."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# mikeybellissimo/LLMTuner#91 (QLoRA of a 70B model): two processes' tracebacks interleaved, the error line
# between the frames of both; what places it (from_pretrained ... _load_state_dict_into_meta_model) comes after.
QLORA_INTERLEAVED = """\
    w_4bit, quant_state = bnb.functional.quantize_4bit(w, blocksize=self.blocksize, compress_statistics=self.compress_statistics, quant_type=self.quant_type)
  File "/mnt/anaconda/envs/Qlora/lib/python3.10/site-packages/bitsandbytes/functional.py", line 760, in quantize_4bit
Traceback (most recent call last):
  File "/mnt/git/Efficient-Tuning-LLMs/examples/finetune_llm/finetune_llama_with_qlora.py", line 72, in <module>
    out = torch.zeros(((n+1)//2, 1), dtype=torch.uint8, device=A.device)
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB (GPU 0; 39.45 GiB total capacity; 4.00 GiB already allocated; 95.25 MiB free; 4.04 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF
    model = AutoModelForCausalLM.from_pretrained(
  File "/mnt/git/transformers/src/transformers/models/auto/auto_factory.py", line 555, in from_pretrained
    return model_class.from_pretrained(
  File "/mnt/git/transformers/src/transformers/modeling_utils.py", line 3175, in from_pretrained
    ) = cls._load_pretrained_model(
  File "/mnt/git/transformers/src/transformers/modeling_utils.py", line 3563, in _load_pretrained_model
    new_error_msgs, offload_index, state_dict_index = _load_state_dict_into_meta_model(
"""

# Lightning-AI/pytorch-lightning#18134 (Falcon-40B, ZeRO-3 offload): the source lines of the gather follow the
# message.
ZERO3_SOURCE_AFTER = """\
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 31.75 GiB total capacity; 30.25 GiB already allocated; 62.19 MiB free; 30.67 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF
    param_coordinator.fetch_sub_module(sub_module, forward=True)
    param_buffer = torch.empty(
"""

# hiyouga/LLaMA-Factory#9510 (DeepSeek-R1 BF16): rank 5's message with no frames, then rank 6's traceback in
# load_model, where the excerpt ends.
RANK_MESSAGE_THEN_SIBLING = """\
[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 56.00 MiB. GPU 5 has a total capacity of 79.33 GiB of which 49.81 MiB is free. Process 415557 has 79.27 GiB memory in use. Of the allocated memory 77.92 GiB is allocated by PyTorch, and 150.18 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
[rank6]: Traceback (most recent call last):
[rank6]:   File "/workspace/cache/ymttest/LLaMA-Factory/src/llamafactory/launcher.py", line 185, in <module>
[rank6]:     run_exp()
[rank6]:   File "/workspace/cache/ymttest/LLaMA-Factory/src/llamafactory/train/tuner.py", line 132, in run_exp
[rank6]:     _training_function(config={"args": args, "callbacks": callbacks})
[rank6]:   File "/workspace/cache/ymttest/LLaMA-Factory/src/llamafactory/train/tuner.py", line 93, in _training_function
[rank6]:     run_sft(model_args, data_args, training_args, finetuning_args, generating_args, callbacks)
[rank6]:   File "/workspace/cache/ymttest/LLaMA-Factory/src/llamafactory/train/sft/workflow.py", line 52, in run_sft
[rank6]:     model = load_model(tokenizer, model_args, finetuning_args, training_args.do_train)
"""


def test_frames_printed_after_the_error_line_place_the_failure() -> None:
    f = parse_log_text(QLORA_INTERLEAVED)
    assert f.oom and f.phase == "load" and f.phase_confidence == "high"
    assert "_load_pretrained_model" in f.frames
    assert any("right after the error line" in e for e in f.phase_evidence)
    assert f.requested_mib == 112.0  # the message is still read whole


def test_source_lines_after_the_message_place_it_in_a_step() -> None:
    f = parse_log_text(ZERO3_SOURCE_AFTER)
    assert f.phase == "first_batch" and f.phase_confidence == "low"  # a step's forward; no progress line
    assert any("ZeRO-3" in e for e in f.phase_evidence)


def test_the_lines_after_count_only_until_the_process_prints_something_else() -> None:
    interrupted = ZERO3_SOURCE_AFTER.replace(
        "    param_coordinator", "[2023-07-25 10:00:01,000] [INFO] launcher exiting\n    param_coordinator"
    )
    f = parse_log_text(interrupted)
    assert f.phase == "unknown"


def test_own_frames_that_tell_the_phase_win_over_the_lines_after() -> None:
    own = (
        "Traceback (most recent call last):\n"
        '  File "/x/transformers/trainer.py", line 3610, in training_step\n'
        "    self.accelerator.backward(loss, **kwargs)\n"
        + ZERO3_SOURCE_AFTER.replace(
            "param_coordinator.fetch_sub_module", "model = AutoModel.from_pretrained"
        )
    )
    f = parse_log_text(own)
    assert f.phase == "first_batch" and "training_step" in f.frames


def test_a_sibling_rank_s_cut_traceback_tells_where_the_ranks_were() -> None:
    f = parse_log_text(RANK_MESSAGE_THEN_SIBLING)
    assert f.oom and f.rank == 5
    assert f.phase == "load" and f.frames[-1] == "run_sft"  # its running line calls load_model(
    assert any("rank6" in e and "rank5" in e for e in f.phase_evidence)


def test_a_sibling_that_ended_in_another_error_lends_nothing() -> None:
    torn_down = (
        RANK_MESSAGE_THEN_SIBLING + "[rank6]: RuntimeError: NCCL communicator was aborted on rank 6.\n"
    )
    f = parse_log_text(torn_down)
    assert f.phase == "unknown"


def test_the_message_s_own_advice_wrapped_onto_a_line_ends_nothing() -> None:
    wrapped = ZERO3_SOURCE_AFTER.replace(
        " If reserved memory is >> allocated memory try setting max_split_size_mb",
        "\nIf reserved memory is >> allocated memory try setting max_split_size_mb",
    )
    f = parse_log_text(wrapped)
    assert f.phase == "first_batch" and f.requested_mib == 512.0
