"""The bundled demo case (``oomdoctor demo``): the course config, a log of its out-of-memory run, and what
its user knows beyond the files. Plain data, read by the app and by anything else that opens the demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomdoctor.resources import configs_dir

# The bundled demo case: the course config and a log of its out-of-memory run.
DEMO_CONFIG = "keywords_clean_train.yaml"
DEMO_LOG = "demo/train.log"
# The course measured the real lengths of its data (chapter 30): the demo knows them as the user would.
DEMO_LENGTHS = "demo/lengths.json"


def demo_paths() -> tuple[Path, Path]:
    """The demo's config and log."""
    base = configs_dir()
    return base / DEMO_CONFIG, base / DEMO_LOG


def demo_known() -> dict[str, Any]:
    """What the demo's user knows beyond the files (``api.gather`` keywords)."""
    return {"lengths_file": configs_dir() / DEMO_LENGTHS}
