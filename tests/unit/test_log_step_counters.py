"""Step lines of trainers that print no tqdm bar (``step_counters`` in log_markers.yaml, read by
facts/log_scan.py like the train bar): a training script's own per-step line, a "Step [n/N]" line, Megatron's
iteration line."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.log_tables import tables

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.10 GiB. GPU 0 has a total capacity of 23.55 "
    "GiB of which 610.31 MiB is free. Including non-PyTorch memory, this process has 22.95 GiB memory in use."
)
EXAMPLES = [e for c in tables().raw["step_counters"] for e in c["examples"]]


@pytest.mark.parametrize("line", EXAMPLES)
def test_each_counter_example_is_read(line: str) -> None:
    f = parse_log_text(line + "\n" + OOM + "\n")
    assert f.good_steps is not None and f.good_steps > 0, line
    assert f.phase == "long_sample"


def test_a_script_s_own_step_line_gives_the_completed_steps() -> None:
    log = "\n".join(
        [
            "Epoch:[1/3](41/5120), loss:2.113, lr:0.000200, epoch_Time:310min",
            "Epoch:[1/3](42/5120), loss:2.087, lr:0.000200, epoch_Time:309min",
            OOM,
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.good_steps == 42 and f.step == 43 and f.phase == "long_sample"


def test_counters_that_are_not_training_steps_are_not_read() -> None:
    # an evaluation's own step line, a step size, a ratio in prose
    evaluation = parse_log_text("***** Running Evaluation *****\nstep 5/40 eval batch\n" + OOM + "\n")
    assert evaluation.good_steps is None and evaluation.phase == "eval"
    for line in ("lr_scheduler step_size 3/4 of the epochs", "stepped 3/4 of the way", "Step 12/7 done"):
        assert parse_log_text(line + "\n" + OOM + "\n").good_steps is None, line


def test_each_counter_alternative_carries_its_hint_and_its_examples_pass_the_pre_check() -> None:
    """The scanner tries the step lines only on a line holding a hint (log_tables.step_counter_hints): an
    alternative without one could never match, and each example must get past the pre-check."""
    from test_log_tables import _top_level_alternatives

    t = tables()
    assert t.step_counter_hints is not None
    for counter in t.raw["step_counters"]:
        for alternative in _top_level_alternatives(counter["pattern"]):
            literal = alternative.replace("\\", "")
            assert any(h in literal for h in counter["hint"]), (counter["pattern"], alternative)
        for example in counter["examples"]:
            assert t.step_counter_hints.search(example), example
    assert not t.step_counter_hints.search("{'loss': 1.2, 'learning_rate': 2e-05, 'epoch': 0.5}")
