"""A traceback cut before its error line (no exception line at all) is not read as an OOM unless its frames
place a phase or the user says where or which memory ran out (rules/derive.log_failed, engine._no_error_line)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.i18n import msg
from oomdoctor.report.diagnosis import report
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# The shape of hiyouga/LLaMA-Factory#32: four PPO processes writing one traceback at once, cut before the
# error (the title's "Tensors must be CUDA and dense"); only entry-point frames, nothing that places a phase.
GLUED_CUT = (
    "Traceback (most recent call last):\n"
    "Traceback (most recent call last):\n"
    '  File "/tmp/cct/src/train_ppo.py", line 82, in <module>\n'
    '  File "/tmp/cct/src/train_ppo.py", line 82, in <module>\n'
    "    main()\n"
    "    main()\n"
    '  File "/tmp/cct/src/train_ppo.py", line 55, in main\n'
    '  File "/tmp/cct/src/train_ppo.py", line 55, in main\n'
    "    ppo_trainer = PPOPeftTrainer(\n"
    " ppo_trainer = PPOPeftTrainer(\n"
)


def test_a_cut_traceback_that_places_nothing_is_no_error_line_and_asks() -> None:
    log = parse_log_text(GLUED_CUT)
    assert log.traceback_cut and not log.oom
    diagnosis = diagnose(facts_of(log=log))
    assert not diagnosis.oom and diagnosis.proposal is None
    assert [f.id for f in diagnosis.findings if f.id in ("no_error_line", "no_oom")] == ["no_error_line"]
    assert [q.key for q in diagnosis.questions] == [
        "memory_kind",
        "phase",
    ]  # which memory and where, together
    assert report(diagnosis, "en").splitlines()[0] == msg("r_no_error_line", "en")


def test_an_answer_makes_the_cut_traceback_an_oom() -> None:
    diagnosis = diagnose(facts_of(log=parse_log_text(GLUED_CUT), answers={"phase": "first_batch"}))
    assert diagnosis.oom and diagnosis.phase == "first_batch"
    assert "traceback_cut" in [f.id for f in diagnosis.findings]


def test_a_message_with_the_error_line_is_still_an_oom() -> None:
    text = GLUED_CUT + (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "23.65 GiB of which 1.10 GiB is free.\n"
    )
    assert diagnose(facts_of(log=parse_log_text(text))).oom
