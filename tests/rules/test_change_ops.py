"""The change-operator registry: each operator checks its operand at load and computes its field's new
value by name; the late ones (keep_product_with) see the others' new values."""

from __future__ import annotations

from typing import Any

import pytest

from oomdoctor.rules.change_ops import CHANGE_OPERATORS, ChangeNotComputable, compute
from oomdoctor.rules.model import CHANGE_OPS, ChangeOp


def test_the_schema_and_the_validator_read_the_registry() -> None:
    assert list(CHANGE_OPS) == list(CHANGE_OPERATORS)
    assert ChangeOp.model_validate({"scale": 0.5}).op == "scale"
    for bad in ({"halve": 2}, {"scale": -1}, {"scale": True}, {"keep_product_with": 3}, {"set": {"a": 1}}):
        with pytest.raises(ValueError, match="takes"):
            ChangeOp.model_validate(bad)


def test_keep_product_with_runs_after_the_field_it_keeps() -> None:
    change = {
        "gradient_accumulation_steps": ("keep_product_with", "per_device_train_batch_size"),
        "per_device_train_batch_size": ("halve", True),
    }
    news, notes = compute(
        change, {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 8}, lambda p: None
    )
    assert news == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 16} and notes == []
    news, notes = compute(
        change, {"per_device_train_batch_size": 3, "gradient_accumulation_steps": 1}, lambda p: None
    )
    assert news == {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 3} and notes == []
    change["per_device_train_batch_size"] = ("scale", 0.4)
    news, notes = compute(
        change, {"per_device_train_batch_size": 5, "gradient_accumulation_steps": 3}, lambda p: None
    )
    assert news == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 8}
    assert notes == [("f_inexact_product", {"field": "gradient_accumulation_steps",
                                            "partner": "per_device_train_batch_size", "before": 15, "after": 16})]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "operand", "old", "expected"),
    [
        ("set", 4, 8, 4),
        ("remove", True, 8, None),
        ("double", True, 2.5, 5.0),
        ("scale", 0.5, 7, 4),
        ("halve", True, 1, 1),
    ],
)
def test_each_operator(op: str, operand: Any, old: Any, expected: Any) -> None:
    assert compute({"f": (op, operand)}, {"f": old}, lambda p: None)[0] == {"f": expected}


def test_an_unknown_value_is_not_computable() -> None:
    with pytest.raises(ChangeNotComputable) as err:
        compute(
            {"cutoff_len": ("set_from", "derived.cutoff_candidate")}, {"cutoff_len": 2048}, lambda p: None
        )
    assert err.value.field == "derived.cutoff_candidate"
    with pytest.raises(ChangeNotComputable):
        compute(
            {"per_device_train_batch_size": ("halve", True)},
            {"per_device_train_batch_size": None},
            lambda p: None,
        )
