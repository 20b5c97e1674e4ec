"""Fixtures for the TUI tests (the helpers they use are in ``tui_helpers``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from functional.tui_helpers import CONFIG_TEXT, OOM_LOG_TEXT, V100
from oomdoctor.facts.gpu import FakeGpuSource


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder where the user typed ``oomdoctor``: a config and the log of its failed run."""
    work = tmp_path / "work"
    (work / "configs").mkdir(parents=True)
    (work / "configs" / "qwen3_lora.yaml").write_text(CONFIG_TEXT, encoding="utf-8")
    (work / "qwen3_lora.log").write_text(OOM_LOG_TEXT, encoding="utf-8")
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def gpu_source() -> FakeGpuSource:
    return FakeGpuSource([V100])
