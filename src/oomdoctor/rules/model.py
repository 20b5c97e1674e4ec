"""The shape of a decision node (one ``rules/*.yaml`` file), as pydantic models.

A node says where memory ran out (``locates``), when it applies (``when``, a tree of ``all``/``any``/``not``
over ``{fact: <path>, <operator>: <operand>}`` leaves), the one change it proposes (``change`` / ``env`` /
``write_deepspeed_template``, or ``manual`` advice the config cannot carry), and the texts a person reads
(``title``, ``why``, ``cost``, ``judge``, ``docs``) in English and Chinese. ``rules.schema.json`` is generated
from these models (``oomdoctor.rules.schema``).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from oomdoctor.facts.types import CAUSES, PHASES
from oomdoctor.rules.change_ops import CHANGE_OPERATORS, FIELD_PATTERN  # noqa: F401  (a name rule tools import from here)
from oomdoctor.rules.operators import OPERATORS

# Phases a node may locate ("none" means no OOM: no node applies there).
NODE_PHASES: tuple[str, ...] = tuple(p for p in PHASES if p != "none")
PhaseName = Literal[NODE_PHASES]  # type: ignore[valid-type]
CauseName = Literal[CAUSES]  # type: ignore[valid-type]

# DeepSpeed templates the config helper ships in configs/deepspeed/<name>.json (LLaMA-Factory's own names).
DEEPSPEED_TEMPLATES: tuple[str, ...] = (
    "ds_z2_config",
    "ds_z2_offload_config",
    "ds_z3_config",
    "ds_z3_offload_config",
)
DeepSpeedTemplate = Literal[DEEPSPEED_TEMPLATES]  # type: ignore[valid-type]

ID_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"
KEY_PATTERN = r"^[a-z][a-z0-9_]*$"

CONDITION_KEYS = ("all", "any", "not")

# Change operators on one config field: name -> (JSON schema of the operand, what it does), from the registry.
CHANGE_OPS: dict[str, tuple[dict[str, Any], str]] = {
    name: (op.operand_schema, op.doc) for name, op in CHANGE_OPERATORS.items()
}


# A folded YAML line break becomes a space; Chinese puts none between characters, nor after punctuation
# (full-width punctuation is never followed by a space, whatever comes next).
_CJK = r"\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_CJK_PUNCT = r"\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
_FOLDED_SPACE = re.compile(
    rf"(?<=[{_CJK}])\s+(?=[{_CJK}])|(?<=[,.;:!?)])\s+(?=[{_CJK}])|(?<=[;,])\s+(?=\d\))"
    rf"|(?<=[{_CJK_PUNCT}])\s+"
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The schema of a rule's text (its docstring is the schema's description); a loaded rule holds the one runtime
# type, oomdoctor.text.Text (rules/nodes.py).
class LocalText(_Strict):
    """A text in both languages; neither may be empty."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)

    @field_validator("zh")
    @classmethod
    def _unfold_zh(cls, value: str) -> str:
        return _FOLDED_SPACE.sub("", value)

    def as_dict(self) -> dict[str, str]:
        return {"en": self.en, "zh": self.zh}


class Condition(BaseModel):
    """``{all: [...]}``, ``{any: [...]}``, ``{not: {...}}`` or a leaf ``{fact: <path>, <operator>: <operand>}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    all_: list[Condition] | None = Field(default=None, alias="all", min_length=1)
    any_: list[Condition] | None = Field(default=None, alias="any", min_length=1)
    not_: Condition | None = Field(default=None, alias="not")
    fact: str | None = None
    op: str | None = None
    operand: Any = None

    @model_validator(mode="before")
    @classmethod
    def _split_leaf(cls, data: Any) -> Any:
        if isinstance(data, Condition):
            return data
        if not isinstance(data, dict):
            raise PydanticCustomError(
                "condition_shape", "a condition is a mapping: all/any/not, or fact + operator"
            )
        branch = [k for k in CONDITION_KEYS if k in data]
        if branch:
            if len(data) != 1:
                raise PydanticCustomError(
                    "condition_shape",
                    "a condition with {keys} must hold nothing else",
                    {"keys": "/".join(branch)},
                )
            return data
        if "fact" not in data:
            raise PydanticCustomError(
                "condition_shape", "a condition needs all/any/not, or fact + one operator"
            )
        ops = [k for k in data if k != "fact"]
        if len(ops) != 1:
            raise PydanticCustomError(
                "condition_shape", "a leaf holds fact and exactly one operator, got {ops}", {"ops": ops}
            )
        op = ops[0]
        if op not in OPERATORS:
            raise PydanticCustomError(
                "unknown_operator",
                "unknown operator '{key}' (known: {known})",
                {"key": op, "known": ", ".join(OPERATORS)},
            )
        problem = OPERATORS[op].check(data[op])
        if problem:
            raise PydanticCustomError(
                "bad_operand", "operator '{key}' {problem}", {"key": op, "problem": problem}
            )
        return {"fact": data["fact"], "op": op, "operand": data[op]}

    @property
    def is_leaf(self) -> bool:
        return self.fact is not None

    def fact_paths(self) -> list[tuple[str, tuple[Any, ...]]]:
        """Every fact path this tree names, with the location (inside the condition) that names it."""
        from oomdoctor.rules.nodes import condition_fact_paths

        return condition_fact_paths(self)


def condition_json_schema(self_ref: dict[str, str]) -> dict[str, Any]:
    """The YAML form of a condition, with the operators from the registry (the pydantic model holds the
    parsed form, so ``schema.py`` puts this in its place)."""
    leaf = {
        "type": "object",
        "description": "a fact path and exactly one operator",
        "properties": {"fact": {"type": "string"}}
        | {name: {**op.operand_schema, "description": op.doc} for name, op in OPERATORS.items()},
        "required": ["fact"],
        "minProperties": 2,
        "maxProperties": 2,
        "additionalProperties": False,
    }
    return {
        "title": "Condition",
        "oneOf": [
            {
                "type": "object",
                "properties": {"all": {"type": "array", "items": self_ref, "minItems": 1}},
                "required": ["all"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"any": {"type": "array", "items": self_ref, "minItems": 1}},
                "required": ["any"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"not": self_ref},
                "required": ["not"],
                "additionalProperties": False,
            },
            leaf,
        ],
    }


class ChangeOp(BaseModel):
    """One field's change: ``{halve: true}``, ``{set: 4}``, ``{keep_product_with: per_device_train_batch_size}``..."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: str
    operand: Any = None

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        if isinstance(data, ChangeOp):
            return data
        if not isinstance(data, dict) or len(data) != 1:
            raise PydanticCustomError(
                "change_shape", "a field's change is one operator: {ops}", {"ops": ", ".join(CHANGE_OPS)}
            )
        ((op, operand),) = data.items()
        if op not in CHANGE_OPS:
            raise PydanticCustomError(
                "unknown_change_op",
                "unknown change operator '{key}' (known: {known})",
                {"key": op, "known": ", ".join(CHANGE_OPS)},
            )
        problem = CHANGE_OPERATORS[op].check(operand)
        if problem:
            raise PydanticCustomError("bad_operand", "'{key}' {problem}", {"key": op, "problem": problem})
        return {"op": op, "operand": operand}


def change_op_json_schema() -> dict[str, Any]:
    """The YAML form of one field's change: exactly one change operator."""
    return {
        "title": "ChangeOp",
        "oneOf": [
            {
                "type": "object",
                "properties": {name: {**schema, "description": doc}},
                "required": [name],
                "additionalProperties": False,
            }
            for name, (schema, doc) in CHANGE_OPS.items()
        ],
    }


class AnswerOption(_Strict):
    value: str = Field(pattern=KEY_PATTERN)
    label: LocalText


class Ask(_Strict):
    """The question to ask when a fact this node needs is unknown. A built-in key (phase, weights_loaded,
    memory_kind, card_bf16) takes no text: the engine owns those questions."""

    key: str = Field(pattern=KEY_PATTERN)
    text: LocalText | None = None
    answers: list[AnswerOption] | None = Field(default=None, min_length=2)


class CauseFromFact(_Strict):
    """The cause read from a fact, e.g. the estimator's dominant term mapped to a cause name."""

    fact: str
    map: dict[str, CauseName]
    default: CauseName = "unknown"


class Locates(_Strict):
    """Where a node applies and what it names as the cause. ``phase``: the phases it is walked in (``unknown``
    among them: it also applies while where it ran out is still unknown, nothing more), or ``any``: every
    phase, the unknown one included, with ``cause_in_any_phase``. ``cause_in_any_phase``: the node's own
    evidence (another process on the card, a request bigger than the card, the host's RAM, a gather frame)
    names its cause, not the phase, so its cause stands in whichever of its phases it ran out (the optimizer
    step's included, whose frames otherwise name the optimizer state)."""

    phase: list[PhaseName] | Literal["any"] = Field(min_length=1)
    cause: CauseName | CauseFromFact
    cause_in_any_phase: bool = False

    @model_validator(mode="before")
    @classmethod
    def _any_phase_names_its_cause(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("phase") == "any":
            if data.get("cause_in_any_phase") is False:
                raise PydanticCustomError(
                    "any_phase_cause", "phase: any names its cause in every phase (cause_in_any_phase)"
                )
            return {**data, "cause_in_any_phase": True}
        return data

    @field_validator("phase", mode="after")
    @classmethod
    def _every_phase(cls, value: list[str] | str) -> list[str]:
        return list(NODE_PHASES) if value == "any" else list(value)


class Guard(_Strict):
    """A condition that skips the node, with the reason shown to the user (e.g. "already on")."""

    when: Condition
    reason: LocalText


class Requirement(_Strict):
    """A Python package the change needs where training runs (checked with find_spec, never imported)."""

    module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    package: str = Field(min_length=1)


class RuleNode(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: LocalText
    aliases: list[str] = Field(default_factory=list)
    locates: Locates
    when: Condition
    ask: Ask | None = None
    change: dict[str, ChangeOp] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    write_deepspeed_template: DeepSpeedTemplate | None = None
    manual: bool = False
    # Offered only when no other node at the phase proposes anything: the advice that remains when nothing
    # in the config is left to change, so a located OOM never ends without a next step.
    fallback: bool = False
    why: LocalText
    cost: LocalText
    judge: LocalText
    guards: list[Guard] = Field(default_factory=list)
    requires: list[Requirement] = Field(default_factory=list)
    rank: int = Field(ge=0)
    next: list[str] = Field(default_factory=list)
    docs: LocalText

    @model_validator(mode="after")
    def _one_kind_of_change(self) -> RuleNode:
        acts = bool(self.change) or bool(self.env) or self.write_deepspeed_template is not None
        if self.manual and acts:
            raise PydanticCustomError(
                "change_shape", "a manual node carries its steps in text: no change, env or template"
            )
        if not self.manual and not acts:
            raise PydanticCustomError(
                "change_shape",
                "a node needs a change (change, env or write_deepspeed_template) or manual: true",
            )
        if self.fallback and not self.manual:
            raise PydanticCustomError(
                "change_shape", "a fallback node is manual advice: set manual: true and no change"
            )
        if self.write_deepspeed_template is not None and "deepspeed" in self.change:
            raise PydanticCustomError(
                "change_shape", "write_deepspeed_template already sets deepspeed; do not change it twice"
            )
        for name, op in self.change.items():
            if op.op == "keep_product_with" and (op.operand == name or op.operand not in self.change):
                raise PydanticCustomError(
                    "change_shape",
                    "{field}: keep_product_with must name another field changed by this node",
                    {"field": name},
                )
        return self
