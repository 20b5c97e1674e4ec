"""Derived facts the held-out real cases (tests/cases/real_holdout.yaml) called for: a prediction run whose
card another process held is not placed in evaluation by the config's run kind. Facts are built by hand, as
in test_engine.py."""

from __future__ import annotations

from test_engine import course, gpu_oom

from oomdoctor.facts.types import OtherProcess
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose


def predict_config():
    return course(do_train=False, do_predict=True, predict_with_generate=True)


def card_taken(own_mib: float, other_mib: float):
    """An OOM whose message lists another process and how much this process holds."""
    return gpu_oom(
        "unknown",
        weights_loaded=None,
        process_in_use_mib=own_mib,
        other_processes=[OtherProcess(pid=100842, used_mib=other_mib)],
    )


def test_a_predict_run_whose_card_another_process_holds_is_not_placed_by_the_config() -> None:
    d = facts_of(config=predict_config(), log=card_taken(own_mib=164.0, other_mib=45107.2)).derived
    assert (d.phase, d.phase_source) == ("unknown", "none")
    diagnosis = diagnose(facts_of(config=predict_config(), log=card_taken(own_mib=164.0, other_mib=45107.2)))
    assert diagnosis.proposal is not None and diagnosis.proposal.rule == "other_process.free_the_card"


def test_a_predict_run_holding_most_of_its_card_is_still_evaluation() -> None:
    d = facts_of(config=predict_config(), log=card_taken(own_mib=30000.0, other_mib=600.0)).derived
    assert (d.phase, d.phase_source) == ("eval", "config")
