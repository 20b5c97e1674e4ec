"""Card names -> memory, for ``--gpu "V100-32GB"`` (the table is gpu_cards.yaml)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from oomdoctor.datafiles import load_data_mapping
from oomdoctor.errors import BadInput
from oomdoctor.i18n import msg
from oomdoctor.records import record

_CARDS_PATH = Path(__file__).with_name("gpu_cards.yaml")


@record(frozen=True)
class Card:
    """A GPU model from the card table: its name and its memory."""

    name: str
    total_mib: float
    bf16: bool


@lru_cache(maxsize=1)
def _cards() -> dict[str, Any]:
    return load_data_mapping(_CARDS_PATH)


def _normalise(text: str) -> str:
    words = re.split(r"[\s_\-/]+", text.lower())
    noise = set(_cards()["noise_words"])
    return "".join(w for w in words if w and w not in noise)


def card_names() -> list[str]:
    return [row["name"] for row in _cards()["cards"]]


def largest_card() -> Card:
    """The card of the table with the most memory: weights beyond it fit no single card the tool knows."""
    row = max(_cards()["cards"], key=lambda r: float(r["total_mib"]))
    return Card(name=row["name"], total_mib=float(row["total_mib"]), bf16=bool(row["bf16"]))


def card_by_name(name: str) -> Card:
    """The card for a user-typed name; BadInput listing the known names when it is not in the table."""
    wanted = _normalise(name)
    for row in _cards()["cards"]:
        keys = {_normalise(row["name"]), *(str(n) for n in row["names"])}
        if wanted in keys:
            return Card(name=row["name"], total_mib=float(row["total_mib"]), bf16=bool(row["bf16"]))
    raise BadInput(msg("est_unknown_card", None, name=name, known=", ".join(card_names())))
