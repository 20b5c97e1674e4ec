"""The config reader settles what the rules used to read from ``config.raw``: a run with no training step
(``evaluation_only``), a vision tower trained (``freeze_vision_tower``), the keys written (``written_keys``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oomdoctor.facts.config import config_from_mapping

RULES_DIR = Path(__file__).resolve().parents[2] / "src" / "oomdoctor" / "rules"


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (
            {
                "stage": "sft",
                "do_predict": True,
                "predict_with_generate": True,
                "eval_dataset": "alpaca_en_demo",
            },
            True,
        ),
        ({"stage": "sft", "predict_with_generate": True, "eval_dataset": "alpaca_en_demo"}, True),
        ({"stage": "sft", "do_train": False, "do_eval": True, "eval_dataset": "alpaca_en_demo"}, True),
        ({"task": "mmlu_test", "n_shot": 5}, True),
        ({"stage": "sft", "do_train": True, "predict_with_generate": True, "do_eval": True}, False),
        ({"stage": "sft", "do_train": True}, False),
        (
            {"stage": "sft", "do_eval": True, "eval_dataset": "alpaca_en_demo"},
            False,
        ),  # do_train not written off
    ],
)
def test_evaluation_only_is_settled_by_the_reader(written: dict, expected: bool) -> None:
    assert config_from_mapping(written).evaluation_only is expected


def test_the_vision_tower_is_frozen_unless_written_false() -> None:
    assert config_from_mapping({"stage": "sft"}).freeze_vision_tower is True
    assert config_from_mapping({"stage": "sft", "freeze_vision_tower": False}).freeze_vision_tower is False
    assert config_from_mapping({"stage": "sft", "freeze_vision_tower": "false"}).freeze_vision_tower is False


def test_written_keys_are_the_files_own() -> None:
    assert config_from_mapping({}).written_keys == frozenset()
    assert config_from_mapping({"stage": "dpo", "cutoff_len": 4096}).written_keys == {"stage", "cutoff_len"}


def test_rules_code_reads_no_raw_config_but_the_documented_path() -> None:
    """Only rules/fact_paths.py names ``config.raw`` (the ``config.raw.<key>`` path a rule file may read)."""
    for path in sorted(RULES_DIR.glob("*.py")):
        if path.name == "fact_paths.py":
            continue
        code = path.read_text(encoding="utf-8")
        assert not re.search(r"\.raw\b", code), path.name
