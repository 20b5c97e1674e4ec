"""The named operators a node's change may use: ``{per_device_train_batch_size: {halve: true}}``.

Like the condition operators (``rules/operators.py``), each one checks its operand when the rules load
(``check``: a typo fails with the file and line) and computes the new value when a node is proposed
(``apply``). ``late`` operators read the other fields' new values, so they run after the rest
(``keep_product_with`` keeps accumulation x micro-batch once the micro-batch changed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from oomdoctor import records
from oomdoctor.records import record

FIELD_PATTERN = r"^[a-z][a-z0-9_]*$"


class ChangeNotComputable(Exception):
    """A node's change needs a value the facts do not hold (e.g. halving an unknown batch size)."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


@record
class ChangeContext:
    """What an operator sees while one node's change is computed."""

    field: str  # the config field being changed
    olds: Mapping[str, Any]  # every changed field's value in effect
    news: dict[str, Any]  # the new values computed so far
    resolve: Callable[[str], Any]  # fact path -> value
    # (message key, fields) of notes about the change, e.g. an accumulation that cannot keep the product
    notes: list[tuple[str, dict[str, Any]]] = records.field(default_factory=list)

    @property
    def old(self) -> Any:
        return self.olds[self.field]


@record(frozen=True)
class ChangeOperator:
    """A change operator a rule may name: its operand check and how it applies."""

    name: str
    doc: str
    operand_schema: dict[str, Any]  # JSON schema of the operand, for rules.schema.json
    check: Callable[[Any], str | None]  # load-time operand check: an error text, or None when fine
    apply: Callable[[ChangeContext, Any], Any]  # (context, operand) -> the field's new value
    late: bool = False  # runs after the other fields' operators (it reads their new values)


CHANGE_OPERATORS: dict[str, ChangeOperator] = {}


def _register(op: ChangeOperator) -> None:
    if op.name in CHANGE_OPERATORS:
        raise RuntimeError(f"change operator {op.name!r} registered twice")
    CHANGE_OPERATORS[op.name] = op


def number(value: Any, field: str) -> float:
    """``value`` as a number, or ChangeNotComputable naming ``field`` (unknown, or not a number)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        raise ChangeNotComputable(field)
    return value


# --- operand checks ----------------------------------------------------------------------------------------


def _takes_true(operand: Any) -> str | None:
    return None if operand is True else "takes true"


def _takes_positive_number(operand: Any) -> str | None:
    ok = not isinstance(operand, bool) and isinstance(operand, int | float) and operand > 0
    return None if ok else "takes a positive number"


def _takes_name(operand: Any) -> str | None:
    return None if isinstance(operand, str) else "takes a name"


def _takes_value(operand: Any) -> str | None:
    return "takes a value, not a mapping" if isinstance(operand, dict) else None


# --- what each computes ------------------------------------------------------------------------------------


def _set(_ctx: ChangeContext, operand: Any) -> Any:
    return operand


def _remove(_ctx: ChangeContext, _operand: Any) -> Any:
    return None


def _set_from(ctx: ChangeContext, operand: Any) -> Any:
    value = ctx.resolve(operand)
    if value is None:
        raise ChangeNotComputable(operand)
    return value


def _halve(ctx: ChangeContext, _operand: Any) -> Any:
    return max(1, int(number(ctx.old, ctx.field)) // 2)


def _double(ctx: ChangeContext, _operand: Any) -> Any:
    return number(ctx.old, ctx.field) * 2


def _scale(ctx: ChangeContext, operand: Any) -> Any:
    scaled = number(ctx.old, ctx.field) * operand
    return max(1, round(scaled)) if isinstance(ctx.old, int) else scaled


def _keep_product_with(ctx: ChangeContext, partner: Any) -> Any:
    before = number(ctx.old, ctx.field) * number(ctx.olds[partner], partner)
    new_partner = number(ctx.news[partner], partner)
    kept = math.ceil(before / new_partner)
    if kept * new_partner != before:
        fields = {
            "field": ctx.field,
            "partner": partner,
            "before": int(before),
            "after": int(kept * new_partner),
        }
        ctx.notes.append(("f_inexact_product", fields))
    return kept


for _op in (
    ChangeOperator("set", "set the field to this value", {}, _takes_value, _set),
    ChangeOperator("halve", "integer half, never below 1", {"const": True}, _takes_true, _halve),
    ChangeOperator("double", "twice the value", {"const": True}, _takes_true, _double),
    ChangeOperator(
        "scale",
        "multiply (integers round, never below 1)",
        {"type": "number", "exclusiveMinimum": 0},
        _takes_positive_number,
        _scale,
    ),
    ChangeOperator(
        "keep_product_with",
        "keep this field x the named field constant (e.g. accumulation x micro-batch)",
        {"type": "string", "pattern": FIELD_PATTERN},
        _takes_name,
        _keep_product_with,
        late=True,
    ),
    ChangeOperator(
        "remove", "delete the key, so LLaMA-Factory's default applies", {"const": True}, _takes_true, _remove
    ),
    ChangeOperator(
        "set_from", "set the field to the value of a fact path", {"type": "string"}, _takes_name, _set_from
    ),
):
    _register(_op)


def compute(
    change: Mapping[str, tuple[str, Any]], olds: Mapping[str, Any], resolve: Callable[[str], Any]
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """New values for ``change`` (field -> (operator, operand)), the late operators last, and the notes."""
    news: dict[str, Any] = {}
    notes: list[tuple[str, dict[str, Any]]] = []
    for late in (False, True):
        for name, (op_name, operand) in change.items():
            op = CHANGE_OPERATORS[op_name]
            if op.late is late:
                ctx = ChangeContext(field=name, olds=olds, news=news, resolve=resolve, notes=notes)
                news[name] = op.apply(ctx, operand)
    return news, notes
