"""A log that shows a run under way and stops with no error line at all is not "no OOM": the answer says where
it stops and asks (rules/log_stop.py, engine._no_error_line); a log that ends with its own reason stays "no OOM"."""

from __future__ import annotations

import json

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.i18n import msg
from oomdoctor.report.diagnosis import report
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.rules.log_stop import log_stop

BANNER = (
    "[INFO|2025-03-02 10:11:12] llamafactory.model.loader:157 >> trainable params: 20,971,520 || "
    "all params: 7,636,587,520 || trainable%: 0.2746\n"
    "[INFO|trainer.py:2414] 2025-03-02 10:11:20,001 >> ***** Running training *****\n"
    "[INFO|trainer.py:2415] 2025-03-02 10:11:20,001 >>   Num examples = 64,000\n"
    "[INFO|trainer.py:2419] 2025-03-02 10:11:20,001 >>   Total optimization steps = 2,000\n"
)


def _bar(first: int, last: int, total: int = 2000) -> str:
    return "".join(
        f" {n * 100 // total:2d}%|##        | {n}/{total} [1:02:{n % 60:02d}<5:10:00, 4.51s/it]\n"
        for n in range(first, last + 1)
    )


def _config(**extra: object):
    raw = {"stage": "sft", "finetuning_type": "lora", "per_device_train_batch_size": 4, "do_train": True}
    return config_from_mapping({**raw, **extra})


def test_a_bar_that_stops_just_before_a_save_is_asked_with_the_save_as_likely() -> None:
    log = parse_log_text(BANNER + _bar(495, 498))
    config = _config(save_steps=500)
    diagnosis = diagnose(facts_of(config=config, log=log))
    assert not diagnosis.oom and diagnosis.proposal is None
    ids = [f.id for f in diagnosis.findings]
    assert "log_stops_train" in ids and "log_stops_next" in ids and "no_oom" not in ids
    assert "500" in next(f for f in diagnosis.findings if f.id == "log_stops_next").text["en"]
    assert [q.key for q in diagnosis.questions] == ["memory_kind", "phase"]
    assert report(diagnosis, "en").splitlines()[0] == msg("r_log_stops", "en")


def test_the_same_bar_far_from_any_save_names_no_likely_place() -> None:
    stop = log_stop(_config(save_steps=500), parse_log_text(BANNER + _bar(300, 307)))
    assert stop is not None and stop.where == "train" and stop.step == 307 and stop.next_kind is None


def test_an_evaluation_every_tenth_of_the_run_is_found_from_its_ratio() -> None:
    config = _config(val_size=0.05, eval_strategy="steps", eval_steps=0.1, save_steps=5000)
    stop = log_stop(config, parse_log_text(BANNER + _bar(196, 199)))
    assert stop is not None and (stop.next_kind, stop.next_step) == ("eval", 200)


def test_answering_the_phase_makes_it_an_oom_and_the_memory_is_asked_next() -> None:
    facts = facts_of(config=_config(save_steps=500), log=parse_log_text(BANNER + _bar(495, 498)))
    diagnosis = diagnose(facts.with_answers({"phase": "save"}))
    assert diagnosis.oom and diagnosis.phase == "save"
    assert [q.key for q in diagnosis.questions] == ["memory_kind"]


def test_a_log_that_stops_after_loading_asks_which_memory_and_places_the_load() -> None:
    text = (
        "Loading checkpoint shards: 100%|##########| 6/6 [11:02<00:00, 110.40s/it]\n"
        "[INFO|2025-03-02 10:11:12] llamafactory.model.loader:157 >> trainable params: 14,770,033,664 || "
        "all params: 14,770,033,664 || trainable%: 100.0000\n"
    )
    facts = facts_of(config=_config(finetuning_type="full"), log=parse_log_text(text))
    first = diagnose(facts)
    assert not first.oom and "log_stops_load" in [f.id for f in first.findings]
    assert [q.key for q in first.questions] == ["memory_kind"]
    answered = diagnose(facts.with_answers({"memory_kind": "host"}))
    assert answered.oom and answered.phase == "load" and answered.cause == "host_ram"


def test_logs_that_end_with_their_own_reason_stay_no_oom_without_a_question() -> None:
    finished = (
        BANNER
        + _bar(1998, 2000)
        + ("{'train_runtime': 9021.3, 'train_samples_per_second': 7.09, 'train_loss': 0.61, 'epoch': 1.0}\n")
    )
    nan_loss = (
        BANNER + _bar(80, 81) + "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.9e-05, 'epoch': 0.04}\n"
    )
    nccl = (
        BANNER
        + _bar(23, 24)
        + (
            "RuntimeError: NCCL communicator was aborted on rank 1. Original reason for failure was: "
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=911, OpType=ALLREDUCE)\n"
        )
    )
    for text in (finished, nan_loss, nccl):
        diagnosis = diagnose(facts_of(config=_config(), log=parse_log_text(text)))
        assert not diagnosis.oom and not diagnosis.questions, text[-120:]
        assert not any(f.id.startswith("log_stops_") for f in diagnosis.findings)


def test_text_that_shows_no_run_is_still_no_oom() -> None:
    diagnosis = diagnose(
        facts_of(log=parse_log_text("pip install -U llamafactory\nSuccessfully installed\n"))
    )
    assert not diagnosis.oom and not diagnosis.questions


def test_a_loss_of_exactly_zero_is_a_broken_run_not_a_kill() -> None:
    text = (
        BANNER + _bar(79, 80) + "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.99e-05, 'epoch': 0.04}\n"
    )
    assert log_stop(_config(), parse_log_text(text)) is None
    healthy = text.replace("'loss': 0.0", "'loss': 1.2731").replace("nan", "0.8812")
    assert log_stop(_config(), parse_log_text(healthy)) is not None


def test_a_log_of_loss_lines_without_a_step_count_says_so() -> None:
    text = "{'loss': 1.4102, 'grad_norm': 0.91, 'learning_rate': 9.7e-06, 'epoch': 0.53}\n" * 3
    diagnosis = diagnose(facts_of(config=_config(), log=parse_log_text(text)))
    assert "log_stops_steps_unknown" in [f.id for f in diagnosis.findings]
    assert all("None" not in f.text["en"] for f in diagnosis.findings)


def test_an_output_dir_whose_step_record_reached_its_total_is_a_finished_run(tmp_path) -> None:
    from oomdoctor.facts.log import read_log

    rows = [
        {"current_steps": n, "total_steps": 4, "loss": 2.0 - 0.1 * n, "lr": 1e-4, "epoch": n / 4}
        for n in range(1, 5)
    ]
    (tmp_path / "trainer_log.jsonl").write_text("".join(f"{json.dumps(r)}\n" for r in rows))
    finished = diagnose(facts_of(config=_config(), log=read_log(tmp_path)))
    assert not finished.oom and not finished.questions
    (tmp_path / "trainer_log.jsonl").write_text("".join(f"{json.dumps(r)}\n" for r in rows[:2]))
    killed = diagnose(facts_of(config=_config(), log=read_log(tmp_path)))
    assert not killed.oom and [q.key for q in killed.questions] == ["memory_kind", "phase"]


# The DeepSpeed launcher's own lines and nothing after them (databrickslabs/dolly#89, a run killed with exit -9).
DEEPSPEED_LAUNCHER = (
    "[2023-04-16 04:08:58,713] [WARNING] [runner.py:186:fetch_hostfile] Unable to find hostfile, will proceed "
    "with training with local resources only.\n"
    "[2023-04-16 04:08:59,241] [INFO] [runner.py:548:main] cmd = /opt/conda/bin/python3.9 -u -m "
    "deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 "
    "--master_port=29500 --module --enable_each_rank_log=None training.trainer\n"
    "[2023-04-16 04:09:01,142] [INFO] [launch.py:135:main] 0 NCCL_VERSION=2.14.3\n"
    "[2023-04-16 04:09:01,142] [INFO] [launch.py:142:main] WORLD INFO DICT: {'localhost': [0]}\n"
    "[2023-04-16 04:09:01,142] [INFO] [launch.py:148:main] nnodes=1, num_local_procs=1, node_rank=0\n"
)


def test_a_log_that_stops_after_the_launcher_started_the_run_is_a_stop_in_the_set_up() -> None:
    """The launcher started the processes and the log ends there: killed in the set-up (asked which memory),
    never "no OOM"; its lines give no phase to an OOM that follows them."""
    log = parse_log_text(DEEPSPEED_LAUNCHER)
    assert log.launched and log.stopped_in is None
    facts = facts_of(config=_config(finetuning_type="full"), log=log)
    first = diagnose(facts)
    assert not first.oom and "log_stops_load" in [f.id for f in first.findings]
    assert [q.key for q in first.questions] == ["memory_kind"]
    answered = diagnose(facts.with_answers({"memory_kind": "host"}))
    assert answered.oom and answered.phase == "load" and answered.cause == "host_ram"
    bare_oom = DEEPSPEED_LAUNCHER + (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "15.75 GiB of which 1.10 GiB is free.\n"
    )
    assert parse_log_text(bare_oom).phase == "unknown"
