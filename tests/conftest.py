"""Shared fixtures. ``tests/`` is on ``sys.path`` (pytest's rootdir conftest), so suites import helpers as
``from fixtures.tiny_qwen3 import ...``.

- ``tiny_qwen3_dir``: a tiny random Qwen3 + tokenizer, built once per session (seconds; needs transformers).
- ``tiny_dataset_dir``: a tiny alpaca dataset with ``dataset_info.json`` (``tiny_train``/``tiny_val``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _user_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite's own user cache (validated rules, data files), never the person's ~/.cache; subprocesses
    inherit it."""
    import os

    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before


@pytest.fixture(scope="session")
def tiny_qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers", reason="building the tiny Qwen3 needs transformers (the train extra)")
    from fixtures.tiny_qwen3 import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture(scope="session")
def tiny_dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.tiny_qwen3 import write_tiny_dataset

    return write_tiny_dataset(tmp_path_factory.mktemp("tiny_data"))
