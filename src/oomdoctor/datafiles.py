"""The one loader for oomdoctor's own YAML data files (markers, defaults, model and card tables, the memory
model): the safe loader, in C when PyYAML was built with libyaml (about ten times faster at start-up).

User files (training configs) are read by ``facts.config``, which reports YAML errors as bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str) -> Any:
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a safe loader


def load_data_file(path: Path) -> Any:
    """A bundled data file, parsed. Callers cache the result (``functools.lru_cache``)."""
    return load_yaml_text(path.read_text(encoding="utf-8"))
