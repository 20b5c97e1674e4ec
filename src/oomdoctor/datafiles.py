"""The one loader for oomdoctor's own YAML data files (markers, defaults, model and card tables, the memory
model): the safe loader, in C when PyYAML was built with libyaml, and a copy in the user cache keyed by
the file's contents, which a start reads several times faster than it parses the YAML.

User files (training configs) are read by ``facts.config``, which reports YAML errors as bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomdoctor import usercache

_KIND = "data-v1"


def load_yaml_text(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


def load_data_mapping(path: Path) -> dict[str, Any]:
    """A bundled data file whose top level is a mapping (every table oomdoctor ships)."""
    data = load_data_file(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: a bundled table must be a mapping")
    return data


def load_data_file(path: Path) -> Any:
    """A bundled data file, parsed. Callers cache the result (``functools.lru_cache``)."""
    raw = path.read_bytes()
    return usercache.kept(_KIND, [(path.name, raw)], lambda: load_yaml_text(raw.decode("utf-8")))
