"""The time limit stops the whole launched tree: no process of a trial survives it.

The launcher here is the fake ``llamafactory-cli`` (tests/fixtures/fake_launcher.py) in its ``hang`` mode: it
starts a sleeping child and sleeps itself, so these tests need no LLaMA-Factory.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from fixtures.commands import oomdoctor
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.trial.runner import run_trial

pytestmark = pytest.mark.integration

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_launcher.py"


def _launcher(pid_file: Path, *env: str) -> str:
    return " ".join(["FAKE_MODE=hang", f"FAKE_PID_FILE={shlex.quote(str(pid_file))}", *env,
                     shlex.quote(sys.executable), shlex.quote(str(FAKE))])  # fmt: skip


def _survivors(pid_file: Path) -> list[int]:
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2  # the launcher and the child it started
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump({"model_name_or_path": "tiny", "stage": "sft", "output_dir": "saves/x"}))
    return path


def test_timeout_kills_the_process_group(config: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    out = tmp_path / "trial"
    started = time.monotonic()
    done = oomdoctor("trial", "--config", str(config), "--steps", "3", "--out", str(out), "--timeout", "2",
                     "--launcher", _launcher(pid_file))  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 60
    result = json.loads((out / "result.json").read_text())
    assert result["timed_out"] is True and result["outcome"] == "timed_out"
    assert result["signal"] == "SIGTERM" and result["survivors_stopped"] >= 2
    assert "Running training" in (out / "train.log").read_text()  # the log of a failed trial is kept
    assert _survivors(pid_file) == []
    assert "time limit" in done.stdout


def test_processes_that_ignore_sigterm_or_leave_the_group_are_killed(config: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    result = run_trial(
        config,
        steps=3,
        out_dir=tmp_path / "trial",
        timeout_s=2,
        launcher=_launcher(pid_file, "FAKE_IGNORE_TERM=1", "FAKE_SETSID=1"),
        source=FakeGpuSource.unavailable(),
        grace_s=1,
    )
    assert result.record["timed_out"] is True
    assert result.record["signal"] == "SIGKILL"  # SIGTERM was ignored: killed after the grace period
    assert _survivors(pid_file) == []  # including the child that started its own session
