"""A log whose last lines are a save's stopped in that save (rules/log_stop.py reading ``LogFacts.stopped_in``):
after the end-of-training summary it is the final save, asked, not a plain "no OOM"; a log that printed a
nan/inf loss or grad_norm anywhere (``LogFacts.nonfinite_seen``) ended for its own reason and stays "no OOM"."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.rules.log_stop import log_stop

SUMMARY = (
    "{'loss': 0.8123, 'grad_norm': 0.51, 'learning_rate': 1e-06, 'epoch': 2.99}\n"
    "100%|##########| 1218/1218 [3:11:40<00:00,  9.44s/it]\n"
    "{'train_runtime': 11500.21, 'train_samples_per_second': 6.77, 'train_steps_per_second': 0.106, "
    "'train_loss': 0.9342, 'epoch': 3.0}\n"
)
FSDP_WARNING = (
    "/usr/lib/python3.11/site-packages/torch/distributed/fsdp/_state_dict_utils.py:312: UserWarning: Failed to "
    "clone() tensor with name _fsdp_wrapped_module.model.layers.30.mlp.up_proj.weight on rank 3. This may mean "
    "that this state_dict entry could point to invalid memory regions after returning from state_dict() call if "
    "this parameter is managed by FSDP. Please check clone implementation of "
    "_fsdp_wrapped_module.model.layers.30.mlp.up_proj.weight. Error: CUDA out of memory. Tried to allocate "
)


def _config():
    return config_from_mapping({"stage": "sft", "finetuning_type": "full", "per_device_train_batch_size": 2})


def test_a_save_warning_after_the_summary_is_a_stop_in_the_final_save_and_is_asked() -> None:
    log = parse_log_text(SUMMARY + FSDP_WARNING.split(" Error:")[0][:160] + "\n")
    assert log.stopped_in == "save" and log.train_runtime_s is not None
    stop = log_stop(_config(), log)
    assert stop is not None and stop.where == "save"
    diagnosis = diagnose(facts_of(config=_config(), log=log))
    ids = [f.id for f in diagnosis.findings]
    assert not diagnosis.oom and "log_stops_save" in ids and "no_oom" not in ids
    assert [q.key for q in diagnosis.questions] == ["memory_kind", "phase"]
    answered = diagnose(facts_of(config=_config(), log=log).with_answers({"phase": "save"}))
    assert answered.oom and answered.phase == "save"


def test_a_summary_then_the_final_save_line_is_still_a_finished_run() -> None:
    log = parse_log_text(
        SUMMARY + "[INFO|trainer.py:3984] 2026-02-11 09:18:22,101 >> Saving model checkpoint to saves/x\n"
    )
    assert log.stopped_in == "save" and not log.stopped_on_warning
    assert log_stop(_config(), log) is None
    assert "no_oom" in [f.id for f in diagnose(facts_of(config=_config(), log=log)).findings]


def test_a_nan_grad_norm_earlier_keeps_a_stopped_log_a_plain_no_oom() -> None:
    steps = "".join(
        f"{{'loss': {loss}, 'grad_norm': {norm}, 'learning_rate': 2e-05, 'epoch': {n / 100:.2f}}}\n"
        f" {n}%|#         | {n}/400 [10:{n:02d}<40:00, 2.1s/it]\n"
        for n, loss, norm in ((10, 1.92, 3.1), (20, 0.0, "nan"), (30, 1.87, 2.9))
    )
    log = parse_log_text("***** Running training *****\n  Total optimization steps = 400\n" + steps)
    assert log.nonfinite_seen and log.last_loss == 1.87
    assert log_stop(_config(), log) is None
    diagnosis = diagnose(facts_of(config=_config(), log=log))
    assert "no_oom" in [f.id for f in diagnosis.findings] and not diagnosis.questions
