"""The card size question (rules/questions.py ``card_gb``): asked only where no file says the card's memory and
the answer changes the diagnosis, settled LAST in ``assemble`` (flag > log > NVML > answer), and said in the
report as the user's answer. The run is LLaMA-Factory#3947 (tests/cases/real_round6_lf.yaml): a Llama-3-8B LoRA
whose log stops after the weights loaded, on shared 80 GB cards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.model import model_from_name
from oomdoctor.facts.types import LogFacts
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.rules.questions import BUILTIN_QUESTIONS

CASES = Path(__file__).resolve().parents[1] / "cases" / "real_round6_lf.yaml"
CARD_SIZES = ("8", "12", "16", "24", "32", "40", "48", "80", "141")


def _case(prefix: str) -> dict:
    return next(c for c in yaml.safe_load(CASES.read_text(encoding="utf-8")) if c["id"].startswith(prefix))


@pytest.fixture(scope="module")
def shared_cards() -> dict:
    return _case("lf-3947-")


def _facts(case: dict, **kw):
    config = config_from_mapping(case["config"])
    log = parse_log_text(case["log_excerpt"])
    return facts_of(
        config=config, log=log, model=model_from_name("meta-llama/Meta-Llama-3-8B-Instruct"), **kw
    )


def test_the_question_offers_nine_sizes_smallest_first() -> None:
    assert BUILTIN_QUESTIONS["card_gb"] == CARD_SIZES


def test_asked_where_no_file_says_the_card_and_the_size_decides(shared_cards: dict) -> None:
    # the log stops after its own markers said loading finished, so where it failed is the user's to say
    # (facts/log_scan.py, context after_load): here the user places it at loading, in a training run that
    # was not resuming (both questions name a cause and come before the card's size)
    facts = _facts(
        shared_cards, answers={"memory_kind": "gpu", "phase": "load", "run_kind": "train", "resumed": "no"}
    )
    assert facts.derived.capacity_mib is None and facts.derived.capacity_source is None
    d = diagnose(facts)
    asked = [q for q in d.questions if q.key == "card_gb"]
    assert asked and [a.value for a in asked[0].answers] == list(CARD_SIZES)
    assert "RTX 3090/4090" in asked[0].answers[3].label.en and "H200" in asked[0].answers[8].label.zh
    # the 8B weights fill an 8 GB card by themselves; on an 80 GB card something else held it
    small = diagnose(facts.with_answers({"card_gb": "8"}))
    big = diagnose(facts.with_answers({"card_gb": "80"}))
    assert small.proposal is not None and big.proposal is not None
    assert big.cause == "other_process" and small.cause != "other_process"
    assert all(q.key != "card_gb" for q in big.questions)


def test_the_answer_is_the_last_source_of_the_card(shared_cards: dict) -> None:
    answered = _facts(shared_cards, answers={"memory_kind": "gpu", "card_gb": "24"})
    assert answered.derived.capacity_mib == 23028 and answered.derived.capacity_source == "answer"
    assert answered.estimate is not None and answered.estimate.gpu_total_mib == 23028
    flagged = _facts(shared_cards, answers={"card_gb": "24"}, capacity_mib=81920)
    assert flagged.derived.capacity_mib == 81920 and flagged.derived.capacity_source == "flag"
    log = LogFacts(oom=True, oom_kind="cuda_oom", capacity_mib=15095.0)
    from_log = facts_of(log=log, answers={"card_gb": "80"})
    assert from_log.derived.capacity_source == "log" and from_log.capacity_mib == 15095.0
    assert all(q.key != "card_gb" for q in diagnose(from_log).questions)


def test_an_answer_that_sizes_the_card_makes_the_estimate_again(shared_cards: dict) -> None:
    facts = _facts(shared_cards, answers={"memory_kind": "gpu"})
    assert facts.estimate is not None and facts.estimate.gpu_total_mib is None
    sized = facts.with_answers({"card_gb": "16"})
    assert sized.estimate is not None and sized.estimate.gpu_total_mib == 15360
    assert sized.estimate.fits is not None
    again = sized.with_answers({"run_kind": "train"})
    assert again.estimate is sized.estimate  # the size unchanged: the estimate is reused


def test_the_report_says_the_size_is_the_users_answer(shared_cards: dict) -> None:
    d = diagnose(_facts(shared_cards, answers={"memory_kind": "gpu", "card_gb": "80"}))
    said = [f for f in d.findings if f.id == "card_answered"]
    assert said and "79.6 GB" in said[0].text.en and "79.6 GB" in said[0].text.zh  # an H100
    assert "your answer" in said[0].text.en and "回答" in said[0].text.zh


def test_answer_card_gb_works_headless(shared_cards: dict, tmp_path: Path, capsys) -> None:
    from oomdoctor.cli import main

    config, log = tmp_path / "train.yaml", tmp_path / "train.log"
    config.write_text(yaml.safe_dump(shared_cards["config"]), encoding="utf-8")
    log.write_text(shared_cards["log_excerpt"], encoding="utf-8")
    words = ["diagnose", "--config", str(config), "--log", str(log), "--json"]
    assert main([*words, "--answer", "memory_kind=gpu", "--answer", "card_gb=80"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["capacity_mib"] == 81559 and out["facts"]["derived"]["capacity_source"] == "answer"
    assert main([*words, "--answer", "card_gb=20"]) == 2  # not one of the nine sizes: bad input
    assert "card_gb" in capsys.readouterr().err


def test_an_open_ended_class_counts_as_its_smallest_card(shared_cards: dict) -> None:
    """Review item 6: "8 GB or less" is a 6 GB card to the estimate, "11-12 GB" an 11 GB 2080 Ti and each
    other class its smallest card's total in the card table (so nothing is said to fit that may not fit on
    the class's smallest card); the label and the finding say so."""
    from oomdoctor.rules.questions import answered_card_mib, builtin_question

    assert (
        answered_card_mib({"card_gb": "8"}) == 6 * 1024 and answered_card_mib({"card_gb": "12"}) == 11 * 1024
    )
    # the classes with cards in the table: the smallest one's nvidia-smi total (an A10, an H100)
    assert answered_card_mib({"card_gb": "24"}) == 23028 and answered_card_mib({"card_gb": "80"}) == 81559
    labels = {a.value: a.label for a in builtin_question("card_gb", "engine").answers}
    assert "counted as 6 GB" in labels["8"].en and "6 GB" in labels["8"].zh and "11 GB" in labels["12"].zh
    facts = _facts(shared_cards, answers={"memory_kind": "gpu", "card_gb": "8"})
    assert facts.derived.capacity_mib == 6144 and facts.derived.capacity_source == "answer"
    said = [f for f in diagnose(facts).findings if f.id == "card_answered"]
    assert said and "6 GB per card" in said[0].text.en and "smallest card" in said[0].text.en
