"""The named operators a rule condition may use: ``{fact: config.cutoff_len, gt: 1024}``.

Conditions are three-valued: an operator answers ``True``, ``False`` or ``None`` (unknown). A fact that is
``None`` is unknown, so every operator except ``known``/``unknown`` answers ``None`` for it; the engine
then may ask a question instead of guessing. Comparison operands may name another fact,
``{fact: data.max_tokens}``, which is resolved at evaluation time.

Each operator checks its operand when the rules load (``check``), so a typo in a rule file fails loudly
with the file and line instead of silently never matching.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oomdoctor.records import record

Resolve = Callable[[str], Any]  # fact path -> value (None: unknown)
Tri = bool | None


@record(frozen=True)
class Operator:
    """A condition operator a rule may name, with its operand's schema."""

    name: str
    doc: str
    evaluate: Callable[[Any, Any, Resolve], Tri]  # (fact value, operand, resolve) -> True/False/None
    operand_schema: dict[str, Any]  # JSON schema of the operand, for rules.schema.json
    check: Callable[[Any], str | None]  # load-time operand check: an error text, or None when fine
    fact_refs: Callable[[Any], list[str]]  # fact paths the operand names (validated at load time)
    unknown_safe: bool = False  # True: also evaluated when the fact is unknown (known/unknown)


OPERATORS: dict[str, Operator] = {}

_SCALAR = {"type": ["string", "number", "integer", "boolean", "null"]}
_FACT_REF = {
    "type": "object",
    "properties": {"fact": {"type": "string"}},
    "required": ["fact"],
    "additionalProperties": False,
}


def _is_fact_ref(operand: Any) -> bool:
    return isinstance(operand, dict) and set(operand) == {"fact"} and isinstance(operand["fact"], str)


def _resolve_operand(operand: Any, resolve: Resolve) -> Any:
    return resolve(operand["fact"]) if _is_fact_ref(operand) else operand


def _refs_of_operand(operand: Any) -> list[str]:
    return [operand["fact"]] if _is_fact_ref(operand) else []


def _no_refs(_operand: Any) -> list[str]:
    return []


def _register(op: Operator) -> None:
    if op.name in OPERATORS:
        raise RuntimeError(f"operator {op.name!r} registered twice")
    OPERATORS[op.name] = op


def _same(a: Any, b: Any) -> bool:
    """Equality that lets YAML's 4 match a fact's 4.0, and compares strings case-insensitively."""
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _check_scalar_or_ref(operand: Any) -> str | None:
    if _is_fact_ref(operand):
        return None
    if isinstance(operand, dict | list):
        return "expects a single value or {fact: <path>}"
    return None


def _check_scalar(operand: Any) -> str | None:
    return "expects a single value" if isinstance(operand, dict | list) else None


def _check_number_or_ref(operand: Any) -> str | None:
    if _is_fact_ref(operand):
        return None
    if isinstance(operand, bool) or not isinstance(operand, int | float):
        return "expects a number or {fact: <path>}"
    return None


def _check_list(operand: Any) -> str | None:
    if not isinstance(operand, list) or not operand:
        return "expects a non-empty list of values"
    if any(isinstance(v, dict | list) for v in operand):
        return "expects a list of single values"
    return None


def _check_bool(operand: Any) -> str | None:
    return None if isinstance(operand, bool) else "expects true or false"


def _eq(value: Any, operand: Any, resolve: Resolve) -> Tri:
    other = _resolve_operand(operand, resolve)
    if other is None and _is_fact_ref(operand):
        return None
    return _same(value, other)


def _ne(value: Any, operand: Any, resolve: Resolve) -> Tri:
    result = _eq(value, operand, resolve)
    return None if result is None else not result


def _compare(test: Callable[[float, float], bool]) -> Callable[[Any, Any, Resolve], Tri]:
    def evaluate(value: Any, operand: Any, resolve: Resolve) -> Tri:
        other = _resolve_operand(operand, resolve)
        if other is None:
            return None
        try:
            return bool(test(float(value), float(other)))
        except (TypeError, ValueError):
            return False

    return evaluate


def _in(value: Any, operand: Any, _resolve: Resolve) -> Tri:
    return any(_same(value, v) for v in operand)


def _not_in(value: Any, operand: Any, _resolve: Resolve) -> Tri:
    return not any(_same(value, v) for v in operand)


def _contains_one(value: Any, needle: Any) -> bool:
    if isinstance(value, str):
        return isinstance(needle, str) and needle.lower() in value.lower()
    if isinstance(value, list | tuple | set):
        return any(
            _contains_one(item, needle) if isinstance(item, str) else _same(item, needle) for item in value
        )
    if isinstance(value, dict):
        return any(_same(k, needle) for k in value)
    return False


def _contains(value: Any, operand: Any, _resolve: Resolve) -> Tri:
    return _contains_one(value, operand)


def _contains_any(value: Any, operand: Any, _resolve: Resolve) -> Tri:
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list | tuple | set) and all(isinstance(item, str) for item in value):
        # the same test as _contains_one's, with each of the fact's strings lowered once (frames x needles)
        lowered = [item.lower() for item in value]
        return any(isinstance(n, str) and any(n.lower() in item for item in lowered) for n in operand)
    return any(_contains_one(value, needle) for needle in operand)


def _known(value: Any, operand: Any, _resolve: Resolve) -> Tri:
    return (value is not None) is operand


def _unknown(value: Any, operand: Any, _resolve: Resolve) -> Tri:
    return (value is None) is operand


def _check_ratio(operand: Any) -> str | None:
    if not isinstance(operand, dict) or set(operand) != {"of", "value"}:
        return "expects {of: <fact path>, value: <number>}"
    if not isinstance(operand["of"], str):
        return "'of' must be a fact path"
    if isinstance(operand["value"], bool) or not isinstance(operand["value"], int | float):
        return "'value' must be a number"
    return None


def _ratio(test: Callable[[float, float], bool]) -> Callable[[Any, Any, Resolve], Tri]:
    """fact / other_fact compared with a number: ``{fact: a, ratio_ge: {of: b, value: 0.5}}`` is a >= 0.5 b."""

    def evaluate(value: Any, operand: Any, resolve: Resolve) -> Tri:
        base = resolve(operand["of"])
        if base is None:
            return None
        try:
            base_f, value_f = float(base), float(value)
        except (TypeError, ValueError):
            return False
        if base_f <= 0:
            return None
        return bool(test(value_f / base_f, float(operand["value"])))

    return evaluate


_RATIO_SCHEMA = {
    "type": "object",
    "properties": {"of": {"type": "string"}, "value": {"type": "number"}},
    "required": ["of", "value"],
    "additionalProperties": False,
}
_NUMBER_OR_REF = {"oneOf": [{"type": "number"}, _FACT_REF]}
_SCALAR_OR_REF = {"oneOf": [_SCALAR, _FACT_REF]}
_LIST = {"type": "array", "items": _SCALAR, "minItems": 1}

_register(
    Operator(
        "is",
        "equal to the value (strings compare case-insensitively)",
        _eq,
        _SCALAR_OR_REF,
        _check_scalar_or_ref,
        _refs_of_operand,
    )
)
_register(
    Operator("is_not", "not equal to the value", _ne, _SCALAR_OR_REF, _check_scalar_or_ref, _refs_of_operand)
)
_register(Operator("in", "one of the listed values", _in, _LIST, _check_list, _no_refs))
_register(Operator("not_in", "none of the listed values", _not_in, _LIST, _check_list, _no_refs))
_register(
    Operator(
        "gt",
        "greater than",
        _compare(lambda a, b: a > b),
        _NUMBER_OR_REF,
        _check_number_or_ref,
        _refs_of_operand,
    )
)
_register(
    Operator(
        "ge",
        "greater than or equal to",
        _compare(lambda a, b: a >= b),
        _NUMBER_OR_REF,
        _check_number_or_ref,
        _refs_of_operand,
    )
)
_register(
    Operator(
        "lt",
        "less than",
        _compare(lambda a, b: a < b),
        _NUMBER_OR_REF,
        _check_number_or_ref,
        _refs_of_operand,
    )
)
_register(
    Operator(
        "le",
        "less than or equal to",
        _compare(lambda a, b: a <= b),
        _NUMBER_OR_REF,
        _check_number_or_ref,
        _refs_of_operand,
    )
)
_register(
    Operator(
        "known",
        "true: the fact is known; false: it is not",
        _known,
        {"type": "boolean"},
        _check_bool,
        _no_refs,
        unknown_safe=True,
    )
)
_register(
    Operator(
        "unknown",
        "true: the fact is not known; false: it is",
        _unknown,
        {"type": "boolean"},
        _check_bool,
        _no_refs,
        unknown_safe=True,
    )
)
_register(
    Operator(
        "contains",
        "a text holds the substring (case-insensitive), or a list holds the item",
        _contains,
        _SCALAR,
        _check_scalar,
        _no_refs,
    )
)
_register(
    Operator(
        "contains_any",
        "contains at least one of the listed values",
        _contains_any,
        _LIST,
        _check_list,
        _no_refs,
    )
)
_register(
    Operator(
        "ratio_ge",
        "fact / other fact >= value",
        _ratio(lambda r, v: r >= v),
        _RATIO_SCHEMA,
        _check_ratio,
        lambda o: [o["of"]],
    )
)
_register(
    Operator(
        "ratio_gt",
        "fact / other fact > value",
        _ratio(lambda r, v: r > v),
        _RATIO_SCHEMA,
        _check_ratio,
        lambda o: [o["of"]],
    )
)
_register(
    Operator(
        "ratio_lt",
        "fact / other fact < value",
        _ratio(lambda r, v: r < v),
        _RATIO_SCHEMA,
        _check_ratio,
        lambda o: [o["of"]],
    )
)
_register(
    Operator(
        "ratio_le",
        "fact / other fact <= value",
        _ratio(lambda r, v: r <= v),
        _RATIO_SCHEMA,
        _check_ratio,
        lambda o: [o["of"]],
    )
)


def apply(name: str, value: Any, operand: Any, resolve: Resolve) -> Tri:
    """Evaluate one leaf. Unknown facts give ``None`` unless the operator is about knowing."""
    op = OPERATORS[name]
    if value is None and not op.unknown_safe:
        return None
    return op.evaluate(value, operand, resolve)
