"""What a trial runs and leaves behind: no variable outside the allow-list reaches it, and no process it
started outlives it (a real double-forking launcher, stopped at the time limit and at its normal end)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from fixtures.commands import oomdoctor
from oomdoctor.errors import BadInput
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.trial import procs
from oomdoctor.trial.env import ALLOWED, allowed_change_env
from oomdoctor.trial.runner import run_trial

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_launcher.py"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    folder = tmp_path / "patched"
    folder.mkdir()
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"model_name_or_path": "tiny", "stage": "sft", "output_dir": "saves/x"}))
    return path


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for(path: Path, timeout_s: float = 10) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


# --- environment -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        {"PATH": "/tmp/evil"},
        {"LD_PRELOAD": "/tmp/evil.so"},
        {"PYTHONPATH": "/tmp/evil"},
        {"BASH_ENV": "/tmp/evil.sh"},
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PATH": "/tmp/evil"},
        {"PYTORCH_CUDA_ALLOC_CONF": "x;rm -rf /"},
        {"FORCE_TORCHRUN": "yes please"},
        {"CUDA_VISIBLE_DEVICES": "7"},
    ],
)
def test_change_json_cannot_set_anything_but_memory_settings(config: Path, tmp_path: Path, env: dict) -> None:
    (config.parent / "change.json").write_text(json.dumps({"rule": "x", "env": env}))
    out = tmp_path / "trial"
    with pytest.raises(BadInput, match="never applies"):
        run_trial(
            config,
            steps=1,
            out_dir=out,
            launcher=f"{sys.executable} {FAKE}",
            source=FakeGpuSource.unavailable(),
        )
    assert not out.exists()  # refused before anything was written or run


def test_change_json_path_never_reaches_the_launch(config: Path, tmp_path: Path) -> None:
    """Through the real command: exit 2 with one line, and the launcher PATH would have found never ran."""
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "ran"
    (evil / "llamafactory-cli").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
    (evil / "llamafactory-cli").chmod(0o755)
    (config.parent / "change.json").write_text(json.dumps({"env": {"PATH": f"{evil}:{os.environ['PATH']}"}}))
    done = oomdoctor("trial", "--config", str(config), "--steps", "1", "--out", str(tmp_path / "t"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "PATH" in done.stderr
    assert not marker.exists() and not (tmp_path / "t").exists()


def test_allowed_memory_settings_pass_with_their_values() -> None:
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128", "FORCE_TORCHRUN": "1"}
    assert allowed_change_env(env, path="change.json") == env
    assert set(ALLOWED) >= {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}
    assert not {"PATH", "LD_PRELOAD", "PYTHONPATH", "CUDA_VISIBLE_DEVICES"} & set(ALLOWED)


def test_the_applied_environment_is_shown_before_launch(config: Path, tmp_path: Path) -> None:
    (config.parent / "change.json").write_text(
        json.dumps({"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}})
    )
    lines: list[str] = []
    launcher = f"FAKE_MODE=print_env FAKE_PRINT_ENV=PYTORCH_CUDA_ALLOC_CONF,PATH {sys.executable} {FAKE}"
    result = run_trial(config, steps=1, out_dir=tmp_path / "t", launcher=launcher,
                       source=FakeGpuSource.unavailable(), on_line=lines.append)  # fmt: skip
    assert (
        lines[0].startswith("[oomdoctor]") and "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in lines[0]
    )
    log = (result.folder / "train.log").read_text()
    assert "ENV PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in log
    assert f"ENV PATH={os.environ['PATH']}" in log  # the user's own PATH, untouched


# --- processes -------------------------------------------------------------------------------------------


def _daemon_launcher(pid_file: Path, *env: str) -> str:
    return " ".join(["FAKE_MODE=hang", "FAKE_DOUBLE_FORK=1", f"FAKE_PID_FILE={shlex.quote(str(pid_file))}", *env,
                     shlex.quote(sys.executable), shlex.quote(str(FAKE))])  # fmt: skip


def test_a_double_forked_daemon_is_stopped_at_the_time_limit(config: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    result = run_trial(config, steps=3, out_dir=tmp_path / "trial", timeout_s=2, grace_s=1,
                       launcher=_daemon_launcher(pid_file, "FAKE_IGNORE_TERM=1"),
                       source=FakeGpuSource.unavailable())  # fmt: skip
    grandchild = int(_wait_for(Path(f"{pid_file}.grandchild")))
    assert result.record["timed_out"] is True
    launcher_pid, middle = (int(p) for p in pid_file.read_text().split())
    assert psutil.pid_exists(grandchild) is False or not _alive(grandchild)  # init adopted it; we found it
    assert not _alive(launcher_pid) and not _alive(middle)
    assert result.record["survivors_stopped"] >= 2


def test_marker_finds_a_process_outside_the_tree_and_stops_it(tmp_path: Path) -> None:
    """The marker alone: a process started by someone else's session, carrying the trial's id."""
    import subprocess

    tracker = procs.TrialProcesses()
    env = {**os.environ, **tracker.env}
    stray = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while stray.pid not in tracker.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stray.pid in tracker.pids() and other.pid not in tracker.pids()
        assert tracker.stop_all(grace_s=2) >= 1
        assert stray.wait(timeout=5) is not None
        assert other.poll() is None  # an unmarked process is never touched
    finally:
        for p in (stray, other):
            p.kill()
            p.wait()


def test_the_cgroup_holds_what_left_the_session_when_one_can_be_made() -> None:
    """Root with a writable cgroup hierarchy (CI): a process that cleared its environment and left the
    session is still found, in the cgroup the launcher joined before it ran."""
    import subprocess

    tracker = procs.TrialProcesses()
    if tracker.cgroup is None:
        pytest.skip("no cgroup can be made here (not root, or no writable cgroup hierarchy)")
    launched = subprocess.Popen(tracker.wrap(["/bin/sh", "-c", "(setsid env -i sleep 30 &); sleep 30"]))
    try:
        deadline = time.monotonic() + 5
        while len(tracker.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(tracker.pids()) >= 2 and not procs.marked_pids(
            tracker.marker
        )  # no marker: the cgroup alone
        assert tracker.stop_all(grace_s=1) >= 2
        assert tracker.pids() == [] and not tracker.cgroup.path.exists()
    finally:
        launched.kill()
        launched.wait()
