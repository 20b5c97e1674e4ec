"""Real LLaMA-Factory runs: skipped, with the reason, where the train extra is not installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def llamafactory_cli() -> Path:
    """``llamafactory-cli`` from this Python's environment (the venv ``scripts/cpu-train-env`` builds)."""
    if importlib.util.find_spec("llamafactory") is None:
        pytest.skip("llamafactory is not installed in this Python (build the env with scripts/cpu-train-env)")
    cli = Path(sys.executable).parent / "llamafactory-cli"
    if not cli.is_file():
        pytest.skip(f"llamafactory is installed but {cli} is missing")
    return cli
