"""Shapes of real logs from round 6's threads (tests/cases/real_round6_*.yaml, paths kept as the reporters pasted
them): each test feeds one excerpt and checks what the reader and the rules make of it."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.rules.log_stop import log_stop

# lm-sys/FastChat#693: a rich box cut before its error line; the frame header wrapped inside the path
# ("…/modules/module." + "py:1818 in state_dict"), not at its ".py:".
RICH_CUT_IN_PATH = """\
│   1817 │   │   │   if module is not None:                                                        │
│ ❱ 1818 │   │   │   │   module.state_dict(destination=destination, prefix=prefix + name + '.', k  │
│                                                                                                  │
│ /ihepbatch/cc/zdzhang/anaconda3/envs/haist/lib/python3.10/site-packages/torch/nn/modules/module. │
│ py:1818 in state_dict                                                                            │
│                                                                                                  │
│   1815 │   │   self._save_to_state_dict(destination, prefix, keep_vars)                          │
│ ❱ 1818 │   │   │   │   module.state_dict(destination=destination, prefix=prefix + name + '.', k  │
"""


def test_a_rich_header_wrapped_inside_its_path_is_one_frame_and_state_dict_is_a_save() -> None:
    facts = parse_log_text(RICH_CUT_IN_PATH)
    assert facts.frames == ["state_dict"]
    assert facts.traceback_cut and not facts.oom
    assert facts.phase == "save"
    diagnosis = diagnose(facts_of(log=facts))
    assert [q.key for q in diagnosis.questions] == ["memory_kind"]  # cut: which memory is asked, not "no OOM"


def test_a_box_line_that_only_looks_like_a_path_start_keeps_the_next_header() -> None:
    text = (
        "│ /data/run/outputs                                                                  │\n"
        "│ /root/lib/python3.10/site-packages/transformers/trainer.py:1929 in _inner_training_loop │\n"
    )
    assert parse_log_text("Traceback (most recent call last)\n" + text).frames == ["_inner_training_loop"]


# modelscope/ms-swift#2416: the evaluation finished, PEFT warns from its save code, then a traceback cut
# before its error line.
PEFT_SAVE = """\
Val: 100%|██████████| 98/98 [00:39<00:00,  2.51it/s]
/home/aistudio/swiftenv/lib/python3.11/site-packages/peft/utils/save_and_load.py:202: UserWarning: Setting `save_embedding_layers` to `True` as embedding layers found in `target_modules`.
  warnings.warn("Setting `save_embedding_layers` to `True` as embedding layers found in `target_modules`.")
Traceback (most recent call last):
  File "/home/aistudio/swiftenv/lib/python3.11/site-packages/swift/cli/sft.py", line 5, in <module>
    sft_main()
"""


def test_a_peft_save_warning_before_a_cut_traceback_places_a_save() -> None:
    facts = parse_log_text(PEFT_SAVE)
    assert facts.traceback_cut
    assert facts.phase == "save" and facts.stopped_in == "save"


# databrickslabs/dolly#111 and Tencent/TencentPretrain#70: DeepSpeed's see_memory_usage lines while ZeRO-3
# builds its partitions / parameter offload, then nothing (the process was killed).
ZERO3_INIT = """\
[2023-05-24 10:02:10,934] [INFO] [utils.py:829:see_memory_usage] DeepSpeedZeRoOffload initialize [begin]
[2023-05-24 10:02:10,935] [INFO] [utils.py:834:see_memory_usage] MA 0.0 GB         Max_MA 0.0 GB         CA 0.73 GB         Max_CA 1 GB
[2023-05-24 10:02:10,935] [INFO] [utils.py:839:see_memory_usage] CPU Virtual Memory:  used = 23.44 GB, percent = 24.8%
Parameter Offload: Total persistent parameters: 266240 in 65 params
[2023-05-24 10:02:10,993] [INFO] [utils.py:829:see_memory_usage] DeepSpeedZeRoOffload initialize [end]
"""


def test_a_log_that_stops_while_deepspeed_initialises_is_a_stop_at_load_and_asks_which_memory() -> None:
    facts = parse_log_text(ZERO3_INIT)
    assert not facts.oom and facts.stopped_in == "zero_init"
    stop = log_stop(None, facts)
    assert stop is not None and stop.where == "load"
    diagnosis = diagnose(facts_of(log=facts))
    assert [q.key for q in diagnosis.questions] == ["memory_kind"]
    answered = diagnose(facts_of(log=facts, answers={"memory_kind": "host"}))
    assert answered.oom and answered.phase == "load" and answered.cause == "host_ram"


def test_a_deepspeed_engine_banner_alone_is_no_stop() -> None:
    facts = parse_log_text(
        "[2025-04-02 10:01:12,440] [INFO] [logging.py:128:log_dist] [Rank 0] DeepSpeed info: version=0.16.4\n"
    )
    assert log_stop(None, facts) is None


# huggingface/peft#1927: a notebook; the message quoted and cut after "GPU ", the traceback cut below Trainer.train
# (the commenter says the evaluation ran out).
NOTEBOOK_FRAGMENT = """\
eval still seems to eat to much memory, but GPU this time
`OutOfMemoryError: CUDA out of memory. Tried to allocate 8.08 GiB. GPU `

---------------------------------------------------------------------------
OutOfMemoryError                          Traceback (most recent call last)
Cell In[22], line 29
     27 )
---> 29 trainer.train()

File ~/micromamba/envs/arcd2-libcheck-peft/lib/python3.11/site-packages/transformers/trainer.py:1932, in Trainer.train(self, resume_from_checkpoint, trial, ignore_keys_for_eval, **kwargs)
   1931 else:
-> 1932     return inner_training_loop(
   1933         args=args,
[...]
"""


def test_a_fragment_cut_at_the_training_loop_places_no_first_batch_and_asks_the_phase() -> None:
    facts = parse_log_text(NOTEBOOK_FRAGMENT)
    assert facts.oom and facts.requested_mib == 8.08 * 1024
    assert facts.phase == "unknown"
    diagnosis = diagnose(facts_of(log=facts))
    assert diagnosis.phase == "unknown" and [q.key for q in diagnosis.questions] == ["phase"]


def test_the_same_frames_under_a_whole_message_keep_the_first_batch_guess() -> None:
    whole = NOTEBOOK_FRAGMENT.replace(
        "GPU `", "GPU 0 has a total capacity of 14.74 GiB of which 42.19 MiB is free.`"
    )
    facts = parse_log_text(whole)
    assert facts.phase == "first_batch" and facts.phase_confidence == "low"


# databrickslabs/dolly#111: the host at 95.3 % in DeepSpeed's own report, then the log stops (killed, -9).
ZERO3_HOST_FULL = """\
[2023-04-20 19:03:19,578] [INFO] [utils.py:831:see_memory_usage] After creating fp32 partitions
[2023-04-20 19:03:19,581] [INFO] [utils.py:832:see_memory_usage] MA 0.13 GB         Max_MA 0.13 GB         CA 0.63 GB         Max_CA 1 GB
[2023-04-20 19:03:19,581] [INFO] [utils.py:840:see_memory_usage] CPU Virtual Memory:  used = 29.71 GB, percent = 95.3%
[2023-04-20 19:03:19,633] [INFO] [utils.py:831:see_memory_usage] Before initializing optimizer states
"""


def test_deepspeed_s_report_of_a_full_host_where_the_log_stops_is_a_host_oom_at_load() -> None:
    facts = parse_log_text(ZERO3_HOST_FULL)
    assert facts.host_ram_percent == 95.3 and facts.host_ram_used_gib == 29.71
    diagnosis = diagnose(facts_of(log=facts))
    assert diagnosis.oom and diagnosis.phase == "load" and diagnosis.cause == "host_ram"
    assert diagnosis.proposal is not None and diagnosis.proposal.rule.startswith("host_ram.")
    line = next(f for f in diagnosis.findings if f.id == "host_ram_report").text
    assert "95.3%" in line["en"] and "29.71 GB" in line["zh"]


def test_a_host_report_well_below_full_proves_nothing_and_the_memory_is_asked() -> None:
    facts = parse_log_text(ZERO3_INIT)
    assert facts.host_ram_percent == 24.8
    diagnosis = diagnose(facts_of(log=facts))
    assert not diagnosis.oom and "host_ram_report" not in [f.id for f in diagnosis.findings]


def test_a_full_host_report_before_training_steps_is_stale_where_the_log_stops_later() -> None:
    steps = "".join(f" {n}%|#   | {n}/100 [00:{n:02d}<01:00, 1.00it/s]\n" for n in range(1, 40))
    facts = parse_log_text(ZERO3_HOST_FULL + "***** Running training *****\n" + steps)
    diagnosis = diagnose(facts_of(log=facts))
    assert not diagnosis.oom and "host_ram_report" not in [f.id for f in diagnosis.findings]
    assert diagnosis.questions  # where it stopped is asked, not settled by the stale report


def test_a_report_line_outside_the_percent_range_is_not_read() -> None:
    from oomdoctor.facts.log_host_report import host_ram_report

    assert host_ram_report("CPU Virtual Memory:  used = 29.71 GB, percent = 953.0%") is None
    assert host_ram_report("CPU Virtual Memory:  used = 29.71 GB, percent = 95.3%") is not None


# torchtune's recipe set-up lines (its own logger), as printed by `tune run lora_finetune_distributed`.
TORCHTUNE_SETUP = """\
INFO:torchtune.utils._logging:Running LoRAFinetuneRecipeDistributed with resolved config:
INFO:torchtune.utils._logging:Model is initialized with precision torch.bfloat16.
INFO:torchtune.utils._logging:Tokenizer is initialized from file.
INFO:torchtune.utils._logging:Optimizer is initialized.
INFO:torchtune.utils._logging:Loss is initialized.
INFO:torchtune.utils._logging:Dataset and Sampler are initialized.
INFO:torchtune.utils._logging:Learning rate scheduler is initialized.
"""
OOM_WORDS = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of "
    "23.68 GiB of which 1.02 GiB is free.\n"
)


def test_torchtune_s_finished_set_up_places_a_frameless_oom_at_the_first_step() -> None:
    facts = parse_log_text(TORCHTUNE_SETUP + OOM_WORDS)
    assert facts.oom and facts.phase == "first_batch"
    cut = parse_log_text(TORCHTUNE_SETUP)
    assert not cut.oom and log_stop(None, cut) is not None  # stops under way: asked, not "no OOM"
    assert diagnose(facts_of(log=cut)).questions


def test_torchtune_s_model_set_up_places_a_frameless_oom_at_load() -> None:
    head = "\n".join(TORCHTUNE_SETUP.splitlines()[:2]) + "\n"
    assert parse_log_text(head + OOM_WORDS).phase == "load"


def test_a_sharded_fsdp_save_frame_is_a_save() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/work/llama-recipes/src/llama_recipes/utils/train_utils.py", line 180, in train\n'
        "    save_model_and_optimizer_sharded(model, rank, train_config)\n"
        '  File "/work/llama-recipes/src/llama_recipes/model_checkpointing/checkpoint_handler.py", line 101, in save_model_and_optimizer_sharded\n'
        "    dist_cp.save_state_dict(\n"
    )
    facts = parse_log_text(log)
    assert facts.traceback_cut and facts.phase == "save"


def test_a_log_that_stops_while_the_dataset_is_read_is_a_stop_at_load() -> None:
    facts = parse_log_text(
        "[INFO|2025-03-02 10:21:44] llamafactory.data.loader:143 >> Loading dataset big_corpus.json...\n"
    )
    stop = log_stop(None, facts)
    assert stop is not None and stop.where == "load"


# lm-sys/FastChat#390: a message recognised from a screenshot (letters dropped, "MiBfree" glued), the next log
# lines run into it, and the reserved figure's decimal point lost ("3764 GiB" on a 39.43 GiB card).
OCR_MESSAGE = (
    "JutofMemoryError: CUDA out of memory. Tried t allocate 388.00 MiB (GPV 0; 39.43 GiB total capacity; 37.42 GiB "
    "already allocated; 126.25 MiBfree; 3764 GiB reserved in total by Pyorch) If reserved memory is >> allocated "
    "memory try setting max split size mb to avoid framentationSee documentation for Memory Management and PYTORCH "
    "CUDA ALLOC CONFwandb: Waiting for W&B process to finish...(failed 1).\n"
)


def test_a_mangled_message_still_gives_its_numbers_but_not_an_impossible_one() -> None:
    facts = parse_log_text(OCR_MESSAGE)
    assert facts.oom
    assert facts.requested_mib == 388.0 and facts.free_mib == 126.25
    assert facts.capacity_mib == round(39.43 * 1024, 2) and facts.allocated_mib == round(37.42 * 1024, 2)
    assert facts.reserved_mib is None  # 3764 GiB cannot be reserved on a 39.43 GiB card


def test_a_whole_message_is_read_by_the_strict_patterns_alone() -> None:
    from oomdoctor.facts.log_oom import parse_oom_numbers

    whole = parse_oom_numbers(
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.93 GiB total capacity; 6.98 GiB already "
        "allocated; 15.56 MiB free; 7.12 GiB reserved in total by PyTorch)"
    )
    assert (whole.requested_mib, whole.free_mib, whole.reserved_mib) == (20.0, 15.56, round(7.12 * 1024, 2))


# hiyouga/LlamaFactory#4213 (the Trainer's banner) and huggingface/transformers#14541 (run_clm's own line and
# DataParallel's gather warning): one process over several GPUs.
DP_BANNER = """\
[INFO|trainer.py:2081] 2024-06-11 11:55:22,961 >>   Instantaneous batch size per device = 1
[INFO|trainer.py:2083] 2024-06-11 11:55:22,961 >>   Training with DataParallel so batch size has been adjusted to: 4
"""
DP_RUN_CLM = (
    "11/26/2021 16:35:03 - WARNING - __main__ - Process rank: -1, device: cuda:0, n_gpu: 8distributed training: "
    "False, 16-bits training: False\n"
)


def test_dataparallel_is_read_with_its_gpus_from_the_banner_or_the_script_s_line() -> None:
    banner = parse_log_text(DP_BANNER)
    assert banner.data_parallel and banner.data_parallel_gpus == 4  # adjusted batch 4 / 1 per device
    clm = parse_log_text(DP_RUN_CLM)
    assert clm.data_parallel and clm.data_parallel_gpus == 8
    one = parse_log_text(DP_RUN_CLM.replace("n_gpu: 8", "n_gpu: 1"))
    assert not one.data_parallel


def test_a_dataparallel_oom_says_gpu_0_gathers_and_not_several_copies_of_ranks() -> None:
    from oomdoctor.facts.config import config_from_mapping

    config = config_from_mapping({"stage": "pt", "finetuning_type": "full", "per_device_train_batch_size": 8})
    banner = (
        "[INFO|trainer.py:1199] >>   Instantaneous batch size per device = 8\n"
        "[INFO|trainer.py:1200] >>   Total train batch size (w. parallel, distributed & accumulation) = 64\n"
        "[INFO|trainer.py:1201] >>   Gradient Accumulation steps = 1\n"
    )
    facts = parse_log_text(DP_RUN_CLM + banner + OOM_WORDS)
    diagnosis = diagnose(facts_of(config=config, log=facts))
    without = diagnose(facts_of(config=config, log=parse_log_text(banner + OOM_WORDS)))
    assert "multi_gpu_no_deepspeed" in [f.id for f in without.findings]  # 64 / 8: eight of something
    ids = [f.id for f in diagnosis.findings]
    assert "data_parallel" in ids and "multi_gpu_no_deepspeed" not in ids
    line = next(f for f in diagnosis.findings if f.id == "data_parallel").text
    assert "8 GPUs" in line["en"] and "GPU 0" in line["zh"]


# huggingface/trl#2250: a trainer's own train() generating inside unwrap_model_for_generation (ZeRO-3), the
# stored copy cut before the error line.
GATHER_CUT = """\
[rank7]: Traceback (most recent call last):
[rank7]:   File "/export/scripts/training.py", line 243, in <module>
[rank7]:     trainer.train(resume_from_checkpoint=config.checkpoint_path)
[rank7]:   File "/export/trainer/trainer_simple_rloo.py", line 195, in train
[rank7]:     with torch.no_grad(), unwrap_model_for_generation(model, self.accelerator) as unwrapped_model:
[rank7]:   File "/opt/conda/lib/python3.12/contextlib.py", line 137, in
"""


def test_a_whole_model_gather_on_a_frame_s_line_is_read_and_proposed_against_once_on_the_gpu() -> None:
    facts = parse_log_text(GATHER_CUT)
    assert facts.traceback_cut and facts.whole_model_gather == "unwrap_model_for_generation"
    answered = diagnose(facts_of(log=facts, answers={"memory_kind": "gpu"}))
    assert answered.cause == "weights"
    assert answered.proposal is not None and answered.proposal.rule == "weights.gather_for_generation"
    assert "unwrap_model_for_generation" in answered.proposal.why["en"]


def test_deepspeed_s_gather_below_it_is_not_read_as_loading() -> None:
    below = GATHER_CUT.replace(
        '[rank7]:   File "/opt/conda/lib/python3.12/contextlib.py", line 137, in\n',
        '[rank7]:   File "/opt/conda/lib/python3.12/site-packages/deepspeed/runtime/zero/partition_parameters.py", '
        "line 2235, in __enter__\n[rank7]:     self.params[0].all_gather(param_list=self.params)\n",
    )
    assert parse_log_text(below).phase != "load"
    plain = parse_log_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.12/site-packages/deepspeed/runtime/zero/partition_parameters.py", '
        "line 2235, in __enter__\n"
    )
    assert plain.phase == "load"  # without the gather above it, DeepSpeed's parameter code is still loading


def test_a_windows_path_wrapped_inside_its_name_is_one_frame_too() -> None:
    text = (
        "Traceback (most recent call last)\n"
        "│ C:\\Users\\me\\envs\\t\\lib\\site-packages\\torch\\nn\\modules\\module. │\n"
        "│ py:1818 in state_dict                                                 │\n"
    )
    assert parse_log_text(text).frames == ["state_dict"]


def test_each_hinted_marker_alternative_carries_its_hint_and_its_examples_pass_the_prefilter() -> None:
    """A marker with a `hint` is tried only on lines holding one (log_tables.marker_hints): an alternative
    without one could never match, and each example line must get past the pre-check."""
    from test_log_tables import _top_level_alternatives

    from oomdoctor.facts.log_tables import tables

    t = tables()
    hinted = [m for m in t.raw["markers"] if m.get("hint")]
    assert hinted and t.marker_hints is not None
    for marker in hinted:
        for alternative in _top_level_alternatives(marker["pattern"]):
            literal = alternative.replace("\\", "")
            assert any(h in literal for h in marker["hint"]), (marker["pattern"], alternative)
        for example in marker.get("examples", []):
            assert t.marker_hints.search(example), example


# hiyouga/LlamaFactory#6827: a rank's traceback cut inside training_step, no progress line before it (the title says
# the OOM came in the middle of training).
CUT_IN_STEP = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/packages/LLaMA-Factory/src/llamafactory/train/sft/workflow.py", line 101, in run_sft
[rank0]:     train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
[rank0]:   File "/environments/llamafactory_env/lib64/python3.11/site-packages/transformers/trainer.py", line 2052, in train
[rank0]:     return inner_training_loop(
[rank0]:   File "/environments/llamafactory_env/lib64/python3.11/site-packages/transformers/trainer.py", line 2388, in _inner_training_loop
[rank0]:     tr_loss_step = self.training_step(model, inputs)
[...]
"""


def test_a_cut_traceback_placed_at_the_first_step_only_by_missing_progress_asks_the_phase_too() -> None:
    facts = parse_log_text(CUT_IN_STEP)
    assert facts.traceback_cut and facts.phase == "first_batch" and facts.phase_confidence == "low"
    asked = [q.key for q in diagnose(facts_of(log=facts)).questions]
    assert set(asked) == {"memory_kind", "phase"}
    bar = " 15%|█▍        | 129/882 [40:17<3:41:05, 17.62s/it]\n"
    placed = parse_log_text(bar + CUT_IN_STEP)
    assert placed.phase == "long_sample"
    assert [q.key for q in diagnose(facts_of(log=placed)).questions] == ["memory_kind"]
