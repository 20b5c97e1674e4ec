"""The validated rule files, kept in the user cache so a start needs neither pydantic nor YAML.

The key hashes the rule files' contents and the code that validates them (``oomdoctor/rules`` and
``oomdoctor/facts``, where the fact paths a rule may name are defined): editing a rule file, or changing
oomdoctor, makes a new key, and the next start validates everything again and writes the new entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor import usercache
from oomdoctor.rules import nodes

if TYPE_CHECKING:
    from oomdoctor.rules.loader import LoadedNode

KIND = "rules-v1"
_PACKAGE = Path(__file__).resolve().parents[1]
# The code whose answer a cached entry stands for: a change to any of it invalidates every entry.
_VALIDATING_CODE = ("rules", "facts")


def digest(files: Sequence[Path]) -> str:
    """The cache key of these rule files and of the validating code (all small files, read whole)."""
    code = sorted(p for sub in _VALIDATING_CODE for p in (_PACKAGE / sub).glob("*.py"))
    parts = [(f"rule:{p.name}", p.read_bytes()) for p in files]
    parts += [(f"code:{p.parent.name}/{p.name}", p.read_bytes()) for p in code]
    return usercache.content_key(KIND, parts)


def load(folder: Path, key: str) -> list[LoadedNode] | None:
    """The nodes cached under ``key``, in their order (None: no usable entry)."""
    from oomdoctor.rules.loader import LoadedNode

    payload = usercache.read(KIND, key)
    if payload is None:
        return None
    try:
        return [
            LoadedNode(
                node=nodes.build(nodes.RuleNode, item["node"]), file=folder / item["file"], line=item["line"]
            )
            for item in payload
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # an entry from a damaged write, or edited by hand: validate afresh


def save(key: str, loaded: Sequence[LoadedNode], dumps: Sequence[dict[str, Any]]) -> None:
    """Keep the validated nodes (``dumps``: each node's validated data) under ``key``."""
    payload = [
        {"file": item.file.name, "line": item.line, "node": dump}
        for item, dump in zip(loaded, dumps, strict=True)
    ]
    usercache.write(KIND, key, payload)
