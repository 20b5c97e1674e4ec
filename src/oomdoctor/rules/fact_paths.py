"""Which dotted paths name a fact: rule files are checked against the typed bundle when they load.

A path is walked through the records of ``rules.facts.Facts`` (``config.cutoff_len``, ``derived.phase``,
``estimate.terms.logits_loss``): a field no record has is a problem the loader reports with the rule
file and line, so a misspelt fact fails loudly instead of making a node silently stop matching.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

from oomdoctor import records
from oomdoctor.rules.facts import Facts

# Groups a rule may read; ``readings`` (the raw facts before assembly) is not one of them.
ROOTS: tuple[str, ...] = tuple(f.name for f in records.fields(Facts) if f.name != "readings")
_MAPPINGS = (dict, collections.abc.Mapping)
# ``llamafactory-cli eval`` reads these besides the training keys (LLaMA-Factory 0.9.5,
# hparams/evaluation_args.py EvaluationArguments); a rule may read them as written (``config.raw.task``).
EVAL_KEYS: frozenset[str] = frozenset(
    {"task", "task_dir", "batch_size", "seed", "lang", "n_shot", "save_dir", "download_mode"}
)
_HINTS_CACHE: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS_CACHE:
        _HINTS_CACHE[cls] = typing.get_type_hints(cls)
    return _HINTS_CACHE[cls]


def _unwrap(tp: Any) -> Any:
    """``X | None`` -> X."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _is_open_mapping(tp: Any) -> bool:
    return tp is Any or tp in _MAPPINGS or typing.get_origin(tp) in _MAPPINGS


def fact_path_problem(path: str) -> str | None:
    """Why ``path`` names no fact (None when it does). Checked against the Facts records."""
    parts = path.split(".")
    root = parts[0]
    if root not in ROOTS:
        return f"no fact group {root!r} (known: {', '.join(ROOTS)})"
    if parts[:2] == ["config", "raw"] and len(parts) == 3:
        return _raw_key_problem(parts[2])
    tp = _unwrap(_hints(Facts)[root])
    for i, part in enumerate(parts[1:], start=1):
        if _is_open_mapping(tp):
            return None if i == len(parts) - 1 else f"{'.'.join(parts[: i + 1])!r} is as deep as it goes"
        if not records.is_record(tp):
            return f"{'.'.join(parts[:i])!r} has no members"
        members = _hints(tp)
        if part not in members:
            known = f" (known: {', '.join(members)})" if root == "derived" else ""
            return f"{getattr(tp, '__name__', tp)} has no field {part!r}{known}"
        tp = _unwrap(members[part])
    if _is_open_mapping(tp) and root in ("answers", "env"):
        return f"{path!r} needs a key, e.g. {root}.NAME"
    if len(parts) == 1:
        return f"{path!r} is a group of facts, not one fact"
    return None


def _raw_key_problem(key: str) -> str | None:
    """``config.raw.<key>`` reads a key as written: it must be one LLaMA-Factory knows (facts/lf_defaults.yaml)."""
    from oomdoctor.facts.config import known_keys

    if key in known_keys() or key in EVAL_KEYS:
        return None
    return f"LLaMA-Factory has no config key {key!r} (config.raw.<key> reads a key as written)"
