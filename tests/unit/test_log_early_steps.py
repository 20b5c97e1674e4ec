"""An OOM after only one or two completed steps, with no frame placing it inside the step, is asked (first
batch or a longer batch), never asserted as a long sample: the first optimizer update allocates the optimizer
state, and a script's own counter may count micro-batches (log_phase ``_training``, ``early_steps``)."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

FRAMES = (
    "Traceback (most recent call last):\n"
    '  File "/work/train_sft.py", line 212, in <module>\n'
    "    train_epoch(epoch, wandb)\n"
    '  File "/work/train_sft.py", line 88, in train_epoch\n'
    "    res = model(X)\n"
    '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl\n'
    "    return forward_call(*args, **kwargs)\n"
    '  File "/work/model/model.py", line 310, in forward\n'
    "    scores = F.softmax(scores.float(), dim=-1).type_as(xq)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacity of "
    "23.64 GiB of which 1.21 GiB is free. Including non-PyTorch memory, this process has 22.41 GiB memory in use.\n"
)


def _counter(done: int) -> str:
    return "".join(
        f"Epoch:[1/2]({n}/31250) loss:{4.1 - n / 1000:.3f} lr:0.000500000000 epoch_Time:{900 - n}min:\n"
        for n in range(1, done + 1)
    )


def test_two_steps_of_a_scripts_counter_then_a_forward_oom_asks_the_phase() -> None:
    log = parse_log_text(_counter(2) + FRAMES)
    assert log.oom and log.good_steps == 2
    assert log.phase == "unknown" and set(log.phase_candidates) == {"first_batch", "long_sample"}
    diagnosis = diagnose(facts_of(config=config_from_mapping({"stage": "sft"}), log=log))
    assert diagnosis.oom and diagnosis.phase != "long_sample"
    assert "phase" in [q.key for q in diagnosis.questions]


def test_many_good_steps_then_the_same_oom_stays_a_long_sample() -> None:
    log = parse_log_text(_counter(40) + FRAMES)
    assert log.good_steps == 40 and log.phase == "long_sample"
