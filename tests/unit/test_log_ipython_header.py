"""IPython and Jupyter print the exception's class on a traceback's first line, before the frames. A notebook
excerpt cut before the error line at the bottom still says what it was there; a cut traceback whose header names
another class, or Python's plain header, says nothing of the memory."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

FRAMES = """\
/tmp/ipykernel_812/2841.py in <cell line: 0>()
----> 1 trainer.train()

/usr/local/lib/python3.11/dist-packages/transformers/trainer.py in train(self, resume_from_checkpoint, trial)
   2236             return inner_training_loop(
"""


def test_a_notebook_header_naming_the_oom_is_the_error_line_of_a_cut_traceback() -> None:
    log = parse_log_text(
        "-" * 75 + "\nOutOfMemoryError                          Traceback (most recent call last)\n" + FRAMES
    )
    assert log.oom and not log.traceback_cut
    assert log.ran_out_of == "gpu" and log.phase == "first_batch"


def test_the_torch_cuda_spelling_reads_the_same() -> None:
    log = parse_log_text(
        "torch.cuda.OutOfMemoryError               Traceback (most recent call last)\n" + FRAMES
    )
    assert log.oom and log.ran_out_of == "gpu"


def test_a_header_naming_another_class_or_none_leaves_the_traceback_cut() -> None:
    for header in (
        "ValueError                                Traceback (most recent call last)",
        "Traceback (most recent call last):",
    ):
        log = parse_log_text(header + "\n" + FRAMES)
        assert not log.oom and log.traceback_cut, header
