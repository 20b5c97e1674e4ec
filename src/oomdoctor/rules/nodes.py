"""Decision nodes as the engine reads them: plain frozen records (oomdoctor.records), built from validated rule files.

``rules/model.py`` (pydantic) is the one definition of what a valid rule file is; it runs when a rule file
is new or changed (``oomdoctor rules check``, the tests, the first start after an edit). Its result is kept
as JSON in the user cache (``rules/compiled.py``), and every later start rebuilds these records from that
JSON without importing pydantic or parsing YAML. Each class here has exactly the fields of its pydantic
twin; ``tests/rules/test_compiled.py`` holds them together.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from oomdoctor import records
from oomdoctor.records import field, record
from oomdoctor.rules.operators import OPERATORS
from oomdoctor.text import Text

# A rule's text in both languages is the one bilingual type; the name is its pydantic twin's (model.LocalText).
LocalText = Text


@record(frozen=True)
class Condition:
    """``all`` / ``any`` / ``not`` over children, or a leaf ``fact`` + ``op`` + ``operand``."""

    all_: tuple[Condition, ...] | None = None
    any_: tuple[Condition, ...] | None = None
    not_: Condition | None = None
    fact: str | None = None
    op: str | None = None
    operand: Any = None

    @property
    def is_leaf(self) -> bool:
        return self.fact is not None

    def fact_paths(self) -> list[tuple[str, tuple[Any, ...]]]:
        return condition_fact_paths(self)


def condition_fact_paths(cond: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """Every fact path a condition tree names, with the location (inside the condition) that names it; for
    this class and its pydantic twin alike (both have ``fact``, ``op``, ``operand``, ``all_``, ``any_``,
    ``not_``)."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    if cond.fact is not None:
        out.append((cond.fact, ("fact",)))
        assert cond.op is not None
        out.extend((ref, (cond.op,)) for ref in OPERATORS[cond.op].fact_refs(cond.operand))
    for key, children in (("all", cond.all_), ("any", cond.any_)):
        for i, child in enumerate(children or ()):
            out.extend((p, (key, i, *loc)) for p, loc in condition_fact_paths(child))
    if cond.not_ is not None:
        out.extend((p, ("not", *loc)) for p, loc in condition_fact_paths(cond.not_))
    return out


@record(frozen=True)
class ChangeOp:
    """One change operator of a rule (set, halve, double, remove ...) and its operand."""

    op: str
    operand: Any = None


@record(frozen=True)
class AnswerOption:
    """One answer a rule's question offers."""

    value: str
    label: LocalText


@record(frozen=True)
class Ask:
    """A question a rule asks when the facts cannot decide it."""

    key: str
    text: LocalText | None = None
    answers: tuple[AnswerOption, ...] | None = None


@record(frozen=True)
class CauseFromFact:
    """A cause read from a fact through a map (with a default)."""

    fact: str
    map: dict[str, str]
    default: str = "unknown"


@record(frozen=True)
class Locates:
    """The phases a rule locates (``any`` written: every one), the cause it names there, and whether that
    cause stands in any of them (``cause_in_any_phase``: its own evidence names it, not the phase)."""

    phase: tuple[str, ...]
    cause: str | CauseFromFact
    cause_in_any_phase: bool = False


@record(frozen=True)
class Guard:
    """A condition under which a rule's change is not proposed, with the reason shown."""

    when: Condition
    reason: LocalText


@record(frozen=True)
class Requirement:
    """A Python package a rule's change needs installed: the module to import and its pip name."""

    module: str
    package: str


@record(frozen=True)
class RuleNode:
    """One decision node of rules/*.yaml, validated and compiled."""

    id: str
    title: LocalText
    locates: Locates
    when: Condition
    why: LocalText
    cost: LocalText
    judge: LocalText
    rank: int
    docs: LocalText
    aliases: tuple[str, ...] = ()
    ask: Ask | None = None
    change: dict[str, ChangeOp] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    write_deepspeed_template: str | None = None
    manual: bool = False
    fallback: bool = False
    guards: tuple[Guard, ...] = ()
    requires: tuple[Requirement, ...] = ()
    next: tuple[str, ...] = ()


# --- building from plain data (a validated model's dump, or the cached JSON) -------------------------------
# Each class's converter is worked out once from its type hints; a start then builds ~600 objects in a few
# hundred microseconds.

Convert = Callable[[Any], Any]
_BUILDERS: dict[type, Callable[[dict[str, Any]], Any]] = {}


def _same(value: Any) -> Any:
    return value


def _converter(tp: Any) -> Convert:
    """A function turning JSON-shaped data into the type ``tp`` names (None stays None)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        classes = [a for a in members if records.is_record(a)]
        plain = [a for a in members if not records.is_record(a)]
        as_class = _converter(classes[0]) if classes else _same
        as_plain = _converter(plain[0]) if plain else _same
        return lambda v: None if v is None else (as_class(v) if isinstance(v, dict) else as_plain(v))
    if records.is_record(tp):
        return lambda v: None if v is None else build(tp, v)
    if origin is tuple:
        item = _converter(typing.get_args(tp)[0])
        return lambda v: None if v is None else tuple(item(x) for x in v)
    if origin is dict:
        item = _converter(typing.get_args(tp)[1])
        return lambda v: None if v is None else {k: item(x) for k, x in v.items()}
    return _same


def _builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    hints = typing.get_type_hints(cls)
    converters = {f.name: _converter(hints[f.name]) for f in records.fields(cls)}

    def make(data: dict[str, Any]) -> Any:
        unknown = data.keys() - converters.keys()
        if unknown:
            raise ValueError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
        return cls(**{name: converters[name](value) for name, value in data.items()})

    return make


def build(cls: type[Any], data: dict[str, Any]) -> Any:
    """An instance of the record type ``cls`` from ``data``; a key ``cls`` has no field for is an error, so a
    field added to the pydantic model and not here fails loudly instead of vanishing."""
    make = _BUILDERS.get(cls)
    if make is None:
        make = _BUILDERS[cls] = _builder(cls)
    return make(data)
