"""Kinds of log the real extra cases (tests/cases/real_extra.yaml) showed the reader: each test feeds the
shape of a real excerpt (paths shortened) and checks the phase and the facts read from it."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

OOM_OLD = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 68.00 MiB (GPU 0; 23.99 GiB total "
    "capacity; 22.07 GiB already allocated; 0 bytes free; 22.99 GiB reserved in total by PyTorch)"
)


# --- rich (box) tracebacks ------------------------------------------------------------------------------------
RICH_SAVE = """\
{'loss': 1.3664, 'learning_rate': 0.00011999999999999999, 'epoch': 0.06}
{'eval_loss': 1.1047903299331665, 'eval_runtime': 27.1525, 'epoch': 0.07}
  2%|██▉            | 50/2019 [24:43<15:52:05, 29.01s/it╭
─────────────────────────────── Traceback (most recent call last) ────────────────────────────────╮
│ /data/work/finetune_8bit_33B.py:261 in <module>                                                  │
│                                                                                                  │
│   260                                                                                            │
│ ❱ 261 trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)                          │
│                                                                                                  │
│ /root/anaconda3/lib/python3.10/site-packages/transformers/trainer.py:1929 in                     │
│ _inner_training_loop                                                                             │
│                                                                                                  │
│ ❱ 1929 │   │   │   │   self._maybe_log_save_evaluate(tr_loss, model, trial, epoch)               │
│                                                                                                  │
│ /data/anaconda3/envs/llama/lib/python3.9/site-packages/bitsandbytes/nn/modules.py: │
│ 268 in _save_to_state_dict                                                                       │
│                                                                                                  │
│   267 │   │   │   if reorder_layout:                                                             │
│ ❱ 268 │   │   │   │   self.weight.data = undo_layout(self.state.CxB, self.state.tile_indices)    │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
OutOfMemoryError: CUDA out of memory. Tried to allocate 68.00 MiB (GPU 0; 23.99 GiB total capacity; 22.07 GiB already allocated; 0 bytes free; 22.99 GiB reserved in total by PyTorch)
"""


def test_rich_box_frames_are_read_including_wrapped_headers() -> None:
    facts = parse_log_text(RICH_SAVE)
    assert facts.oom and facts.oom_kind == "bnb"  # raised in bitsandbytes' code, read from the box's paths
    assert facts.phase == "save"
    assert facts.frames == ["<module>", "_inner_training_loop", "_save_to_state_dict"]
    assert facts.step == 50
    assert facts.requested_mib == 68.0


def test_rich_box_cut_before_its_error_line_is_a_cut_traceback() -> None:
    cut = RICH_SAVE.split("╰")[0]
    facts = parse_log_text(cut)
    assert facts.traceback_cut and not facts.oom
    assert facts.phase == "save"


# --- a job platform's timestamp on every line -----------------------------------------------------------------
STAMPED = """\
2023-09-14 21:27:58.000 [INFO] [Driver] model, optimizer, _, _ = deepspeed.initialize(
2023-09-14 21:27:58\t2023-09-14 21:27:58.000 [INFO] [Driver] File "/opt/conda/lib/python3.8/site-packages/deepspeed/__init__.py", line 171, in initialize
2023-09-14 21:27:58\t2023-09-14 21:27:58.000 [INFO] [Driver] engine = DeepSpeedEngine(args=args,
2023-09-14 21:27:58\t2023-09-14 21:27:58.000 [INFO] [Driver] File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1505, in _configure_zero_optimizer
2023-09-14 21:27:58\t2023-09-14 21:27:58.000 [INFO] [Driver] optimizer = DeepSpeedZeroOptimizer_Stage3(
2023-09-14 21:27:59\t2023-09-14 21:27:59.000 [INFO] [Driver] torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total capacity; 77.10 GiB already allocated; 1.20 GiB free; 77.60 GiB reserved in total by PyTorch)
"""


def test_platform_stamped_traceback_lines_are_traceback_lines() -> None:
    facts = parse_log_text(STAMPED)
    assert facts.oom
    assert (
        facts.phase == "load" and facts.setup_step == "optimizer_init"
    )  # set-up, not an update (issue 8 item 4)
    assert facts.frames == ["initialize", "_configure_zero_optimizer"]
    assert facts.requested_mib == 2048.0


def test_ordinary_timestamped_log_records_are_not_taken_for_tracebacks() -> None:
    text = (
        "2025-01-20 10:29:11.183 INFO Saving checkpoint...\n"
        "2025-01-20 10:29:11.786 INFO model, optimizer = prepare(model)\n"
    )
    facts = parse_log_text(text)
    assert not facts.oom and not facts.traceback_cut


# --- an error printed before the traceback it belongs to -------------------------------------------------------
NCCL_SAVE = """\
batch-block7-00788:791989:835177 [6] include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'
[rank6]: Traceback (most recent call last):
[rank6]:   File "/usr/local/lib/python3.10/site-packages/transformers/trainer.py", line 2589, in _inner_training_loop
[rank6]:     self._maybe_log_save_evaluate(
[rank6]:   File "/usr/local/lib/python3.10/site-packages/transformers/trainer.py", line 3055, in _maybe_log_save_evaluate
[rank6]:     self._save_checkpoint(model, trial)
[rank6]:   File "/usr/local/lib/python3.10/site-packages/transformers/trainer.py", line 3301, in _save_optimizer_and_scheduler
[rank6]:     self.model_wrapped.save_checkpoint(output_dir)
"""


def test_an_error_line_with_no_traceback_takes_the_traceback_that_follows() -> None:
    facts = parse_log_text(NCCL_SAVE)
    assert facts.oom and facts.oom_kind == "cuda_error"
    assert facts.phase == "save"
    assert "_save_optimizer_and_scheduler" in facts.frames


DDP_TWO_RANKS = f"""\
{OOM_OLD.replace("GPU 0", "GPU 4")}
    model = torch.nn.parallel.DistributedDataParallel(
  File "/root/miniconda3/envs/ds/lib/python3.8/site-packages/torch/nn/parallel/distributed.py", line 688, in __init__
    self._ddp_init_helper(
  File "/root/miniconda3/envs/ds/lib/python3.8/site-packages/torch/nn/parallel/distributed.py", line 825, in _ddp_init_helper
    self.reducer = dist.Reducer(
{OOM_OLD.replace("GPU 0", "GPU 7")}
[2023-09-15 10:25:35,881] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 2279792
"""


def test_a_second_rank_message_ahead_of_its_frames_gives_them_to_the_first() -> None:
    facts = parse_log_text(DDP_TWO_RANKS)
    assert facts.oom and facts.gpu_index == 4  # the first message is reported
    # DDP's gradient buckets, from the frames between the two: built when the model is wrapped, before any step
    assert facts.phase == "load" and facts.setup_step == "ddp_buckets"
    assert facts.frames == ["__init__", "_ddp_init_helper"]


def test_a_failure_with_its_own_frames_keeps_them() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x/transformers/trainer.py", line 2200, in _inner_training_loop\n'
        "    tr_loss_step = self.training_step(model, inputs)\n"
        '  File "/x/torch/autograd/__init__.py", line 267, in backward\n'
        "    _engine_run_backward(\n"
        f"{OOM_OLD}\n"
        "Traceback (most recent call last):\n"
        '  File "/x/transformers/trainer.py", line 3191, in _save_checkpoint\n'
        "    self._save_optimizer_and_scheduler(output_dir)\n"
    )
    facts = parse_log_text(text)
    assert facts.phase == "first_batch"
    assert "_save_checkpoint" not in facts.frames


# --- an excerpt cut right after a traceback header -----------------------------------------------------------
def test_cut_right_after_the_header_is_a_cut_traceback_placed_by_the_progress() -> None:
    text = (
        " 15%|█▍        | 129/882 [40:17<3:41:05, 17.62s/it]Traceback (most recent call last):\n"
        "  8%|▊         |\n"
    )
    facts = parse_log_text(text)
    assert facts.traceback_cut and not facts.oom
    assert facts.phase == "long_sample"
    assert facts.phase_confidence == "low"  # no frame at all: only the progress says where
    assert facts.step == 130


def test_a_complete_log_that_never_failed_has_no_cut() -> None:
    facts = parse_log_text(" 15%|█▍        | 129/882 [40:17<3:41:05, 17.62s/it]\n")
    assert not facts.traceback_cut and facts.phase == "none"


# --- the Trainer's after-step hook ---------------------------------------------------------------------------
AFTER_STEP = """\
{'loss': 0.717, 'grad_norm': 0.7494966983795166, 'learning_rate': 0.0002503039932980217, 'epoch': 1.38}
 28%|█████▊         | 200/720 [1:38:25<4:14:20, 29.35s/it][rank3]: Traceback (most recent call last):
[rank3]:   File "/x/transformers/trainer.py", line 1885, in train
[rank3]:     return inner_training_loop(
[rank3]:   File "/x/transformers/trainer.py", line 2291, in _inner_training_loop
[rank3]:     self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch, ignore_keys_for_eval)
[rank3]:   File
"""


def test_cut_in_the_after_step_hook_is_eval_or_save_not_training() -> None:
    facts = parse_log_text(AFTER_STEP)
    assert facts.traceback_cut
    assert facts.phase == "unknown"
    assert facts.phase_candidates == ["eval", "save"]
    assert facts.step == 200  # the step that completed before the hook ran
    assert facts.rank == 3


def test_a_forward_below_the_after_step_hook_is_evaluation() -> None:
    text = AFTER_STEP.replace(
        "[rank3]:   File\n",
        '[rank3]:   File "/x/models/llama/modeling_llama.py", line 381, in forward\n'
        "[rank3]:     attn_weights = nn.functional.softmax(attn_weights, dim=-1)\n",
    )
    facts = parse_log_text(text)
    assert facts.phase == "eval"
    assert facts.phase_candidates == []


# --- kills and markers ----------------------------------------------------------------------------------------
def test_a_scheduler_oom_kill_while_saving_is_host_ram_at_save() -> None:
    text = (
        "nid005143:0 out: 2025-01-20 10:29:10.590        nid005143:0     olmo.train:967  INFO    [step=50/65355,epoch=0]\n"
        "nid005143:0 out: 2025-01-20 10:29:11.183        nid005143:0     olmo.train:1259 INFO    Saving checkpoint...\n"
        "slurmstepd: error: Detected 1 oom_kill event in StepId=9178265.0. Some of the step tasks have been OOM Killed.\n"
    )
    facts = parse_log_text(text)
    assert facts.oom and facts.oom_kind == "killed" and facts.ran_out_of == "host"
    assert facts.phase == "save"


# --- the card's name -----------------------------------------------------------------------------------------
def test_card_name_from_an_env_report() -> None:
    facts = parse_log_text(f"- GPU type: NVIDIA A100-SXM4-40GB\n{OOM_OLD}\n")
    assert facts.card_name == "NVIDIA A100-SXM4-40GB"


def test_card_name_of_the_failing_gpu_from_an_nvidia_smi_table() -> None:
    text = (
        "|   0  Tesla V100-SXM2...  On   | 00000000:1A:00.0 Off |                    0 |\n"
        "|   1  NVIDIA A800-SXM...  On   | 00000000:65:02.0 Off |                    0 |\n"
        f"{OOM_OLD.replace('GPU 0', 'GPU 1')}\n"
    )
    facts = parse_log_text(text)
    assert facts.gpu_index == 1
    assert facts.card_name == "NVIDIA A800-SXM"  # the row of GPU 1, nvidia-smi's "..." cut taken off


def test_no_card_name_when_the_log_prints_none() -> None:
    assert parse_log_text(OOM_OLD + "\n").card_name is None


# --- the ZeRO stage a partial config leaves out ------------------------------------------------------------------
def test_zero_stage_from_the_stage_files_a_traceback_passes_through() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x/deepspeed/runtime/zero/stage3.py", line 2050, in step\n'
        "    self._optimizer_step(sub_group_id)\n"
        f"{OOM_OLD}\n"
    )
    assert parse_log_text(text).zero_stage == 3
    assert parse_log_text(STAMPED).zero_stage == 3  # the code line builds DeepSpeedZeroOptimizer_Stage3
    assert parse_log_text(OOM_OLD + "\n").zero_stage is None
