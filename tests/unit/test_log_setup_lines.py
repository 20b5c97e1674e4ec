"""Set-up lines of other trainers as markers: torchtune's recipe set-up (the model's initialisation is load; once
the optimizer, the loss, the data and the scheduler are initialized, its training loop is next), DeepSpeed ZeRO-3
building the partitioned model, axolotl's loader lines."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

SETUP = """\
INFO:torchtune.utils._logging:Running FullFinetuneRecipeDistributed with resolved config:
INFO:torchtune.utils._logging:FSDP is enabled. Instantiating model and loading checkpoint on Rank 0 ...
INFO:torchtune.utils._logging:Model is initialized with precision torch.bfloat16.
INFO:torchtune.utils._logging:Memory stats after model init:
	GPU peak memory allocation: 16.12 GiB
"""
AFTER_SETUP = """\
INFO:torchtune.utils._logging:Tokenizer is initialized from file.
INFO:torchtune.utils._logging:Optimizer is initialized.
INFO:torchtune.utils._logging:Loss is initialized.
INFO:torchtune.utils._logging:Dataset and Sampler are initialized.
INFO:torchtune.utils._logging:Learning rate scheduler is initialized.
"""
OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity "
    "of 79.14 GiB of which 2.05 GiB is free.\n"
)


def test_a_failure_while_the_model_is_set_up_is_at_load() -> None:
    f = parse_log_text(SETUP + OOM)
    assert f.phase == "load" and any("torchtune was setting up its recipe" in e for e in f.phase_evidence)


def test_a_failure_after_the_set_up_is_the_first_step() -> None:
    f = parse_log_text(SETUP + AFTER_SETUP + OOM)
    assert f.phase == "first_batch" and f.training_started


def test_a_failure_while_the_recipe_builds_its_optimizer_or_data_is_still_set_up() -> None:
    """Training starts only once the scheduler (or the profiler) is set up; the data is built before it."""
    built = "".join(AFTER_SETUP.splitlines(keepends=True)[:4])  # up to "Dataset and Sampler are initialized."
    f = parse_log_text(SETUP + built + OOM)
    assert f.phase == "load" and not f.training_started


def test_after_the_first_steps_it_is_a_later_step() -> None:
    bar = "1|40|Loss: 1.0342:   8%|▊         | 40/500 [10:00<1:55:00, 15.00s/it]\n"
    f = parse_log_text(SETUP + AFTER_SETUP + bar + OOM)
    assert f.phase == "long_sample" and f.good_steps == 40


def test_a_failure_after_zero3_built_the_model_is_at_load() -> None:
    line = (
        "[2024-05-10 09:12:44,118] [INFO] [partition_parameters.py:345:__exit__] finished initializing model - "
        "num_params = 723, num_elems = 70.55B\n"
    )
    assert parse_log_text(line + OOM).phase == "load"


def test_axolotl_s_loader_lines_mark_load() -> None:
    line = "[2024-02-01 10:00:00,000] [INFO] [axolotl.load_model:562] [PID:97] [RANK:0] loading model and peft_config...\n"
    assert parse_log_text(line + OOM).phase == "load"


def test_the_files_a_save_reports_keep_it_a_save() -> None:
    # a 14B full ZeRO-3 run killed while it writes checkpoint-500 (tests/cases/logs/exit_minus9_at_save.log's shape)
    lines = (
        " 26%|██        | 500/1875 [58:02<2:41:10, 7.03s/it]\n"
        "[INFO|configuration_utils.py:414] 2024-11-19 14:28:47,351 >> Configuration saved in "
        "saves/qwen2.5-14b/full/sft/checkpoint-500/config.json\n"
    )
    f = parse_log_text(lines + OOM)
    assert f.phase == "save" and f.saving
    after = lines + " 27%|██▋       | 501/1875 [58:20<2:41:00, 7.03s/it]\n"
    assert parse_log_text(after + OOM).phase == "long_sample"  # training went on after the save
