"""Step lines and bars of more trainers (``step_counters`` and ``train_bar_forms`` in log_markers.yaml): lines
that state no total (litgpt's "iter N step M", nanoGPT's zero-based "iter N: loss", verl's "step:N - ..."),
and a bar described by its running loss (torchtune's "1|12|Loss: 1.68"), read like the Trainer's train bar."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.log_tables import tables

OOM = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.06 GiB. GPU 0 has a total capacty of "
    "23.70 GiB of which 1.27 GiB is free. Including non-PyTorch memory, this process has 22.43 GiB memory in use. "
    "Of the allocated memory 12.62 GiB is allocated by PyTorch, and 8.65 GiB is reserved by PyTorch but "
    "unallocated."
)


def test_litgpt_iter_and_step_give_the_optimizer_steps_done() -> None:
    # Lightning-AI/litgpt#303: adapter fine-tuning on one RTX 3090
    log = "\n".join(
        [
            "iter 3435 step 53: loss 2.8011, iter time: 398.71ms",
            "iter 3436 step 53: loss 2.9911, iter time: 400.10ms",
            "Traceback (most recent call last):",
            OOM,
        ]
    )
    f = parse_log_text(log + "\n")
    assert (f.phase, f.good_steps, f.step) == ("long_sample", 53, 54)
    assert f.total_steps is None  # the line states none


def test_litgpt_step_zero_is_the_first_batch() -> None:
    f = parse_log_text("iter 4 step 0: loss 2.6297, iter time: 827.80ms\n" + OOM + "\n")
    assert f.phase == "first_batch" and f.good_steps == 0 and f.step == 1


def test_nanogpt_counts_its_steps_from_zero() -> None:
    first = parse_log_text("iter 0: loss 4.2245, time 33582.11ms, mfu -100.00%\n" + OOM + "\n")
    assert first.good_steps == 1 and first.phase == "unknown"  # so few steps: asked
    assert set(first.phase_candidates) == {"first_batch", "long_sample"}
    later = parse_log_text(
        "iter 1999: loss 1.3141, time 33.12ms, mfu 20.51%\niter 2000: loss 1.2245, time 33.58ms, mfu 20.44%\n"
        + OOM
        + "\n"
    )
    assert later.good_steps == 2001 and later.phase == "long_sample"


def test_verl_metrics_line_counts_a_step() -> None:
    line = (
        "step:37 - global_seqlen/min:10562.000 - global_seqlen/max:13408.000 - actor/entropy:0.521 - "
        "actor/pg_loss:-0.003 - critic/score/mean:0.41"
    )
    f = parse_log_text(line + "\n" + OOM + "\n")
    assert f.good_steps == 37 and f.phase == "long_sample"


def test_torchtune_step_bar_is_the_training_bar() -> None:
    bar = "1|12|Loss: 1.6853430271148682:   2%|▏         | 12/500 [00:39<26:38,  3.27s/it]"
    f = parse_log_text(bar + "\n" + OOM + "\n")
    assert (f.phase, f.good_steps, f.total_steps) == ("long_sample", 12, 500)


@pytest.mark.parametrize("line", [e for form in tables().raw["train_bar_forms"] for e in form["examples"]])
def test_each_training_bar_form_example_counts_steps(line: str) -> None:
    f = parse_log_text(line + "\n" + OOM + "\n")
    assert f.good_steps and f.phase == "long_sample", line


def test_lines_like_them_that_count_no_training_step_are_not_read() -> None:
    for line in (
        "iteration 3 of the search: loss 2.1",  # prose
        "Map (num_proc=8): loss of 3 rows",  # no step
        "Loss: computing ...:  40%|████      | 4/10 [00:01<00:01,  3.1it/s]",  # not a number: data preparation
    ):
        f = parse_log_text(line + "\n" + OOM + "\n")
        assert f.good_steps is None and not f.training_started, line


def test_deepspeed_step_report_and_deepspeed_chat_loop() -> None:
    report = (
        "[2024-03-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=40, skipped=3, lr=[9.8e-06]"
    )
    assert parse_log_text(report + "\n" + OOM + "\n").good_steps == 40
    chat = parse_log_text("Epoch: 0, Step: 57, Rank: 0, loss = 1.9132812023162842\n" + OOM + "\n")
    assert chat.good_steps == 58 and chat.phase == "long_sample"


def test_bars_described_by_epoch_or_steps_are_training_loops() -> None:
    for bar in (
        "Epoch 1/3:  45%|████▌     | 450/1000 [12:00<14:40,  1.60s/it, loss=1.23]",
        "Steps:  10%|█         | 100/1000 [05:00<45:00,  3.00s/it, lr=1e-05, step_loss=0.8]",
    ):
        f = parse_log_text(bar + "\n" + OOM + "\n")
        assert f.phase == "long_sample" and f.good_steps in (450, 100), bar


def test_global_step_lines() -> None:
    assert parse_log_text("global step = 2400 | loss 0.511\n" + OOM + "\n").good_steps == 2400
    # a DeepSpeed checkpoint name and a step with its total are not read by these entries
    saving = "[Rank 0] [Torch] Checkpoint global_step500 is about to be saved!\n"
    assert parse_log_text(saving + OOM + "\n").phase == "save"
    assert parse_log_text("Epoch [1/3], Step [120/1563], Loss: 2.3134\n" + OOM + "\n").total_steps == 1563


def test_openrlhf_episode_bar_is_the_training_loop() -> None:
    bar = "Episode [1/1]:  10%|█         | 10/100 [1:02:00<9:18:00, 372.00s/it]"
    f = parse_log_text(bar + "\n" + OOM + "\n")
    assert f.phase == "long_sample" and f.good_steps == 10


def test_lightning_s_sanity_check_is_an_evaluation() -> None:
    bar = "Sanity Checking DataLoader 0:  50%|█████     | 1/2 [00:03<00:03,  0.30it/s]"
    assert parse_log_text(bar + "\n" + OOM + "\n").phase == "eval"


def test_llamafactory_webui_label_and_a_pasted_trainer_log_record() -> None:
    assert parse_log_text("Running 120/1000: 0:10:23 < 1:16:01\n" + OOM + "\n").good_steps == 120
    record = '{"current_steps": 30, "total_steps": 750, "loss": 1.2183, "lr": 4.99e-05, "epoch": 0.12}'
    f = parse_log_text(
        "[INFO|trainer.py:2128] >> ***** Running training *****\n" + record + "\n" + OOM + "\n"
    )
    assert (f.good_steps, f.total_steps, f.phase) == (30, 750, "long_sample")


def test_an_excerpt_that_starts_with_a_trainer_log_record_is_still_a_log() -> None:
    record = '{"current_steps": 30, "total_steps": 750, "loss": 1.2183, "lr": 4.99e-05, "epoch": 0.12}'
    f = parse_log_text(record + "\n" + OOM + "\n")
    assert f.oom and f.good_steps == 30 and f.requested_mib == 8253.44
    pure = parse_log_text(record + "\n" + record.replace("30", "31") + "\n")
    assert not pure.oom and pure.good_steps == 31  # a trainer_log.jsonl alone is read as one
