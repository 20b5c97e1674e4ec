"""Rule texts filled with facts: ``{config.cutoff_len}``, ``{old.per_device_train_batch_size}``,
``{new.gradient_accumulation_steps}``, ``{derived.model_size_mib:.0f}``, in both languages."""

from __future__ import annotations

from typing import Any

from oomdoctor.report import units
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.loader import PLACEHOLDER
from oomdoctor.text import Text


def show(value: Any, spec: str | None = None) -> str:
    """A fact as a rule text prints it: "?" when unknown, floats without trailing zeros, lists joined."""
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "true" if value else "false"
    if spec:
        try:
            return format(value, spec)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.2f}".rstrip("0").rstrip(".")
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value)
    return str(value)


def count_text(value: float | None) -> str:
    """A count as findings print it (tokens, pixels): whole, with thousands separators; "?" when unknown."""
    return units.number(value, missing="?")


def mib_text(value: float | None) -> str:
    """MiB as findings print them: whole, with thousands separators; "?" when unknown."""
    return units.mib(value, unit=False, missing="?")


def render(text: Text, facts: Facts, changes: dict[str, list[Any]]) -> Text:
    """Fill ``{fact.path}``, ``{old.field}``, ``{new.field}`` (optionally ``{path:.0f}``) in both languages."""

    def fill(match: Any) -> str:
        ref, spec = match.group(1), match.group(2)
        head, _, rest = ref.partition(".")
        if head in ("old", "new"):
            pair = changes.get(rest)
            value = None if pair is None else pair[0 if head == "old" else 1]
        else:
            value = facts.get(ref)
        return show(value, spec)

    return Text(en=PLACEHOLDER.sub(fill, text.en), zh=PLACEHOLDER.sub(fill, text.zh))
