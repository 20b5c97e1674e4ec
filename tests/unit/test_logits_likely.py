"""With the phase still open, an estimate whose largest term is the loss's logits names them as the likely cause
of a training-step OOM, beside the phase question (a finding, not a phase: rules/findings._logits_likely)."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.model import model_from_name
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose


def _diagnosis(**fields: object):
    config = config_from_mapping(
        {
            "model_name_or_path": "Qwen/Qwen2.5-7B-Instruct",
            "finetuning_type": "lora",
            "do_train": True,
            **fields,
        }
    )
    return diagnose(facts_of(config=config, model=model_from_name(config.model_name_or_path)))


def test_a_dpo_run_at_a_long_cutoff_names_the_pair_of_logits_and_asks_the_phase() -> None:
    d = _diagnosis(stage="dpo", cutoff_len=16384, per_device_train_batch_size=2)
    ids = [f.id for f in d.findings]
    assert "logits_likely_pairs" in ids and d.phase == "unknown"
    assert [q.key for q in d.questions] == ["memory_kind", "phase"]  # "GPU or host memory?" and where
    line = next(f for f in d.findings if f.id == "logits_likely_pairs").text["en"]
    assert "16384" in line and "chosen" in line


def test_a_short_sft_cutoff_says_nothing_of_logits() -> None:
    d = _diagnosis(stage="sft", cutoff_len=512, per_device_train_batch_size=1)
    assert not {"logits_likely", "logits_likely_pairs"} & {f.id for f in d.findings}


def test_once_the_phase_is_known_the_finding_is_not_repeated() -> None:
    config = config_from_mapping(
        {
            "model_name_or_path": "Qwen/Qwen2.5-7B-Instruct",
            "stage": "sft",
            "cutoff_len": 32768,
            "do_train": True,
        }
    )
    facts = facts_of(
        config=config, model=model_from_name(config.model_name_or_path), answers={"phase": "first_batch"}
    )
    assert "logits_likely" not in [f.id for f in diagnose(facts).findings]
    unanswered = facts_of(config=config, model=model_from_name(config.model_name_or_path))
    assert "logits_likely" in [f.id for f in diagnose(unanswered).findings]
