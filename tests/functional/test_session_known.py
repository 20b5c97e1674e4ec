"""What the user told us (and the lengths measured in the app) follows the run's own changes and their
trials, and is forgotten when another run is opened."""

from __future__ import annotations

import json
from pathlib import Path

from oomdoctor.facts.types import DataFacts
from oomdoctor.tui.session import HistoryEntry, Session


def _session(tmp_path: Path) -> tuple[Session, Path]:
    config = tmp_path / "train.yaml"
    config.write_text("per_device_train_batch_size: 4\n", encoding="utf-8")
    session = Session(cwd=tmp_path, config=config, log=tmp_path / "train.log")
    session.known = {"data": DataFacts(source="tokenized", max_tokens=957)}
    return session, config


def test_a_trial_of_this_sessions_change_keeps_the_measured_lengths(tmp_path: Path) -> None:
    session, _ = _session(tmp_path)
    change = tmp_path / "trials" / "01-halve"
    change.mkdir(parents=True)
    (change / "config.yaml").write_text("per_device_train_batch_size: 2\n", encoding="utf-8")
    session.history.append(HistoryEntry(folder=change, config_path=change / "config.yaml", rule="r", title={},
                                        changes={}, command=""))  # fmt: skip
    trial = tmp_path / "trials" / "01-halve-trial"
    trial.mkdir()
    (trial / "config.yaml").write_text("max_steps: 50\n", encoding="utf-8")
    (trial / "result.json").write_text(json.dumps({"source_config": str(change / "config.yaml")}), "utf-8")

    session.open_run(trial / "config.yaml", trial / "train.log")
    assert session.config == change / "config.yaml" and session.parent_trial == trial
    assert session.known["data"].max_tokens == 957


def test_another_run_forgets_them(tmp_path: Path) -> None:
    session, _ = _session(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("per_device_train_batch_size: 8\n", encoding="utf-8")
    session.open_run(other, None)
    assert session.known == {}


def test_reopening_the_same_run_keeps_them(tmp_path: Path) -> None:
    session, config = _session(tmp_path)
    session.open_run(config, tmp_path / "train.log")
    assert session.known["data"].max_tokens == 957
