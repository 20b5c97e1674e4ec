"""An OOM message's own words on where it happened (``message_contexts`` in log_markers.yaml): DeepSpeed's
"Occurs during ZeRO optimizer state initialization." (a real public thread's message, dllm) is the optimizer's
set-up at loading, whether the excerpt keeps it on the message's line or on the next one."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text

HEAD = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 14.9 GiB."
WORDS = "Occurs during ZeRO optimizer state initialization."


@pytest.mark.parametrize("sep", ["\n", " "])
def test_the_messages_words_place_the_zero_optimizers_set_up(sep: str) -> None:
    f = parse_log_text("Error Log\n\n" + HEAD + sep + WORDS + "\n")
    assert f.oom and f.requested_mib == pytest.approx(14.9 * 1024)
    assert f.phase == "load" and f.setup_step == "optimizer_init"


def test_the_message_alone_leaves_the_phase_unknown() -> None:
    f = parse_log_text("Error Log\n\n" + HEAD + "\n")
    assert f.oom and f.phase == "unknown" and f.setup_step is None
