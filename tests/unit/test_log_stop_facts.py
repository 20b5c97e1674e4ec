"""What a log that stops without an error line still says (LogFacts.stopped_in, LogFacts.nonfinite_seen; read by
the rules for "the log stops at <where>"), and FSDP's state-dict warning after training as the final save."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

RUNTIME = "{'train_runtime': 5162.78, 'train_samples_per_second': 10.07, 'train_loss': 1.0267, 'epoch': 1.0}"
FSDP_WARNING = "/usr/lib/python3.10/site-packages/torch/distributed/fsdp/fully_sharded_data_parallel.py:2224: UserWarning"


def test_where_a_log_without_error_stops() -> None:
    shards = "Loading checkpoint shards: 100%|██████████| 8/8 [19:40<00:00, 147.57s/it]"
    assert parse_log_text(shards + "\n").stopped_in == "after_load"  # every shard read: loading had finished
    assert parse_log_text(shards.replace("100%", " 62%").replace("8/8", "5/8") + "\n").stopped_in == "load"
    bar = " 17%|█▋        | 998/5793 [21:00:47<100:15:23, 75.27s/it]"
    f = parse_log_text(bar + "\n")
    assert f.stopped_in == "train" and f.good_steps == 998 and not f.oom
    assert parse_log_text(RUNTIME + "\n").stopped_in == "after_train"
    assert parse_log_text("nothing a reader knows\n").stopped_in is None


def test_an_fsdp_state_dict_warning_after_training_is_the_final_save() -> None:
    f = parse_log_text(
        RUNTIME + "\n" + "100%|██████████| 812/812 [1:26:02<00:00,  6.36s/it]\n" + FSDP_WARNING + "\n"
    )
    assert not f.oom and f.stopped_in == "save"
    # the same warning while the model is wrapped, before training, is no save
    early = parse_log_text(
        "Loading checkpoint shards: 100%|██████████| 2/2 [00:04<00:00,  2.1s/it]\n" + FSDP_WARNING + "\n"
    )
    assert early.stopped_in == "after_load"


def test_a_nan_loss_or_gradient_is_seen_in_any_of_its_printed_forms() -> None:
    for line in (
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.99e-05, 'epoch': 0.03}",
        "'loss': 0.000, 'grad_norm': nan",
        "{'loss': 'nan', 'grad_norm': 'inf', 'learning_rate': '1e-05', 'epoch': '0.2'}",
        "Epoch:[1/1](40/19994), Loss: nan, LR:0.00000030",
    ):
        assert parse_log_text(line + "\n").nonfinite_seen, line
    for line in (
        "{'loss': 1.2104, 'grad_norm': 0.83, 'learning_rate': 0.0, 'epoch': 1.0}",
        "loss_scale: 65536, information: nanoGPT baseline",
    ):
        assert not parse_log_text(line + "\n").nonfinite_seen, line
