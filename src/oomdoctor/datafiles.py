"""The one loader for oomdoctor's own YAML data files (markers, defaults, model and card tables, the memory
model): the safe loader, in C when PyYAML was built with libyaml, and a JSON copy in the user cache keyed by
the file's contents, which a start reads several times faster than it parses the YAML.

User files (training configs) are read by ``facts.config``, which reports YAML errors as bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from oomdoctor import usercache

_KIND = "data-v1"


def load_yaml_text(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


# JSON keys are strings; a mapping with other keys (``2: offload_optimizer``) is kept as its items.
_ITEMS = "\u0000items"


def _to_json(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _to_json(v) for k, v in value.items()}
        return {_ITEMS: [[k, _to_json(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if _ITEMS in value:
            return {k: _from_json(v) for k, v in value[_ITEMS]}
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def load_data_mapping(path: Path) -> dict[str, Any]:
    """A bundled data file whose top level is a mapping (every table oomdoctor ships)."""
    data = load_data_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: a bundled table must be a mapping")
    return data


def load_data_file(path: Path) -> Any:
    """A bundled data file, parsed. Callers cache the result (``functools.lru_cache``)."""
    raw = path.read_bytes()
    key = usercache.content_key(_KIND, [(path.name, raw)])
    cached = usercache.read(_KIND, key)
    if isinstance(cached, dict) and "data" in cached:
        return _from_json(cached["data"]) if cached.get("items") else cached["data"]
    data = load_yaml_text(raw.decode("utf-8"))
    encoded = _to_json(data)
    plain = encoded == data
    if _survives_json(encoded, data):
        usercache.write(_KIND, key, {"items": not plain, "data": encoded})
    return data


def _survives_json(encoded: Any, data: Any) -> bool:
    """Only what comes back unchanged is kept (a date, a set or a NaN would not)."""
    try:
        return bool(_from_json(json.loads(json.dumps(encoded))) == data)
    except (TypeError, ValueError):
        return False
