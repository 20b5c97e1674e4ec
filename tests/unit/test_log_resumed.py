"""A run that resumes from a checkpoint (``LogFacts.resumed``): the Trainer's own line, or the reporter's words
beside the message (nanoGPT, a real public thread); a config dump that only names the option is no resume."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text


def test_the_trainers_continuing_line_is_a_resume() -> None:
    log = (
        "[INFO|trainer.py:2134] 2024-05-02 10:11:12,001 >>   Continuing training from checkpoint, will skip to "
        "saved global_step\n"
    )
    assert parse_log_text(log).resumed


def test_the_reporters_words_beside_the_message_are_a_resume() -> None:
    log = "\n".join(
        [
            "When training a large model that takes up almost the entire memory capacity of my GPU, I am unable to "
            "resume training from a checkpoint (despite being able to initialize and train the model from scratch).",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.resumed


def test_a_config_dump_naming_the_option_is_no_resume() -> None:
    log = "resume_from_checkpoint=None,\nrun_name=saves/qwen,\n{'loss': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
    assert not parse_log_text(log).resumed
