"""The memory-kind question's third answer, "it did not run out of memory" (rules/questions.py): a thread
brought with no log (a NaN loss, a hang) can say so, and then no OOM is said; it is not offered beside a log
line that shows an OOM, and it is never tried as a what-if (it ends the diagnosis, it changes no proposal)."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.asking import _builtin_question
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.rules.questions import offered, tried

# LLaMA-Factory#8088's config as the reporter gave it (a LoRA run whose grad_norm went NaN, loss 0): no log.
NAN_CONFIG = {"finetuning_type": "lora"}
# A real CUDA message (the shape of LLaMA-Factory#7490's): the OOM is in the log itself.
OOM_LOG = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.71 GiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 1.02 GiB is free.\n"
)


def _asked(d, key: str) -> list[str]:
    return next(([a.value for a in q.answers] for q in d.questions if q.key == key), [])


def test_no_log_offers_it_and_the_answer_says_no_oom() -> None:
    facts = facts_of(config=config_from_mapping(NAN_CONFIG))
    first = diagnose(facts)
    assert first.oom and _asked(first, "memory_kind") == ["gpu", "host", "none"]
    label = next(
        a.label for q in first.questions if q.key == "memory_kind" for a in q.answers if a.value == "none"
    )
    assert "did not run out of memory" in label.en and "没有内存不足" in label.zh
    answered = diagnose(facts.with_answers({"memory_kind": "none"}))
    assert not answered.oom and answered.phase == "none" and answered.proposal is None
    assert not answered.questions
    ids = [f.id for f in answered.findings]
    assert ids[0] == "no_oom_answered" and "no_log" not in ids
    assert (
        "did not run out of memory" in answered.findings[0].text.en
        and "没有内存不足" in answered.findings[0].text.zh
    )
    # the other answers still make it an OOM to place
    assert diagnose(facts.with_answers({"memory_kind": "gpu"})).oom


def test_not_offered_beside_an_oom_line_and_not_a_reason_to_ask() -> None:
    """A traceback cut before its error line asks the memory kind and may be no OOM (offered there); a log
    with the CUDA message is an OOM (not offered). "none" never makes a question worth asking by itself."""
    cut = parse_log_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/LLaMA-Factory/src/llamafactory/train/sft/workflow.py", line 96, in run_sft\n'
        "    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)\n"
    )
    cut_d = diagnose(facts_of(config=config_from_mapping(NAN_CONFIG), log=cut))
    assert not cut_d.oom and "none" in _asked(cut_d, "memory_kind")
    oom = facts_of(config=config_from_mapping(NAN_CONFIG), log=parse_log_text(OOM_LOG))
    assert oom.log is not None and oom.log.oom
    question = _builtin_question(oom, "memory_kind", "engine")
    assert [a.value for a in question.answers] == ["gpu", "host"]
    # the what-ifs that decide whether to ask never try it
    assert tried("memory_kind", offered("memory_kind")) == ("gpu", "host")
