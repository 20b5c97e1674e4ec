"""A run that resumes from a checkpoint (``LogFacts.resumed``), in the words its program prints: the Trainer's
"Continuing training from checkpoint", an accelerate script's "Resumed from checkpoint: <path>". A config dump that
only names the option, or a reporter's sentence, is no resume."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text


def test_the_trainers_continuing_line_is_a_resume() -> None:
    log = (
        "[INFO|trainer.py:2134] 2024-05-02 10:11:12,001 >>   Continuing training from checkpoint, will skip to "
        "saved global_step\n"
    )
    assert parse_log_text(log).resumed


def test_an_accelerate_scripts_resumed_line_is_a_resume() -> None:
    log = "\n".join(
        [
            "Resumed from checkpoint: outputs/step_2000",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.resumed


def test_a_config_dump_or_a_sentence_is_no_resume() -> None:
    log = (
        "resume_from_checkpoint=None,\nrun_name=saves/qwen,\n"
        "I am unable to resume training from a checkpoint, because CUDA keeps running out of memory.\n"
    )
    assert not parse_log_text(log).resumed
