"""The `contains_any` condition answers as `contains` does for each listed value, whatever the fact holds."""

from __future__ import annotations

from typing import Any

import pytest

from oomdoctor.rules.operators import _contains_any, _contains_one

VALUES: list[Any] = [
    "paged_AdamW_8bit",
    ["Trainer.train", "nested_concat", "LlamaForCausalLM.forward"],
    ("fsdp_unshard", "FLAT_PARAM"),
    [],
    ["cross_entropy", 4, True],
    {"8bit": 1, "lion": 2},
    None,
    4.0,
]
NEEDLES: list[list[Any]] = [
    ["8bit", "paged"],
    ["NESTED_concat", "gather"],
    ["flat_param"],
    [4],
    ["absent"],
    [],
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("needles", NEEDLES)
def test_contains_any_is_contains_of_one_of_them(value: Any, needles: list[Any]) -> None:
    expected = any(_contains_one(value, needle) for needle in needles)
    assert _contains_any(value, needles, lambda path: None) is expected
