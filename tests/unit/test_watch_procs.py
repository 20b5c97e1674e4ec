"""Finding a run by its command line, and the host limits it is under (real processes, read only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from oomdoctor.watch import procs

SLEEPER = "import sys, time; time.sleep(30)"


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(args, cwd=cwd)
    program = args[args.index(sys.executable) :]  # after prlimit has set the limit and exec'd it
    for _ in range(100):  # until its command line is the program's, not the fork's
        try:
            if psutil.Process(proc.pid).cmdline() == program:
                break
        except psutil.Error:
            pass
        time.sleep(0.02)
    return proc


def test_a_run_is_found_by_its_config_or_output_dir_relative_to_its_folder(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text("model_name_or_path: m\n")
    by_config = _start([sys.executable, "-c", SLEEPER, "train.yaml"], tmp_path)
    by_output = _start([sys.executable, "-c", SLEEPER, f"output_dir={tmp_path / 'saves'}"], tmp_path)
    try:
        found = procs.find_training(str(tmp_path / "train.yaml"), str(tmp_path / "saves"))
        assert found == sorted([by_config.pid, by_output.pid])
        assert procs.find_training(str(tmp_path / "other.yaml"), None) == []
        assert os.getpid() not in found  # this test names nothing, but our own lineage is skipped anyway
        tree = procs.ProcessTree([by_config.pid])
        assert [p.pid for p in tree.members()] == [by_config.pid]
        by_config.kill()
        by_config.wait()
        assert tree.members() == []
    finally:
        for proc in (by_config, by_output):
            proc.kill()
            proc.wait()


def test_the_address_space_cap_of_a_prlimit_child_is_its_binding_limit(tmp_path: Path) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    cap = 3 * 1024**3
    child = _start([prlimit, f"--as={cap}", sys.executable, "-c", SLEEPER], tmp_path)
    try:
        proc = psutil.Process(child.pid)
        limits = procs.host_limits([proc])
        rlimit = next(lim for lim in limits if lim.source == "rlimit_as")
        assert rlimit.limit_mib == 3072 and rlimit.pid == child.pid
        assert 0 < rlimit.used_mib < 3072 and rlimit.left_mib == pytest.approx(3072 - rlimit.used_mib)
        assert limits[-1].source == "host"
        assert min(limits, key=lambda lim: lim.left_mib).source in ("rlimit_as", "cgroup")
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_cgroup_memory_limit_in_either_hierarchy(tmp_path: Path, version: str) -> None:
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    if version == "v2":
        rel = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), None)
        folder, names = tmp_path / (rel or "/").lstrip("/"), ("memory.max", "memory.current")
    else:
        rel = next((ln.split(":", 2)[2] for ln in lines if "memory" in ln.split(":", 2)[1].split(",")), None)
        folder, names = (
            tmp_path / "memory" / (rel or "/").lstrip("/"),
            ("memory.limit_in_bytes", "memory.usage_in_bytes"),
        )
    if rel is None:
        pytest.skip(f"this process has no cgroup {version} entry")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / names[0]).write_text(f"{8 * 1024**3}\n")
    (folder / names[1]).write_text(f"{6 * 1024**3}\n")
    limit = procs.cgroup_limit(os.getpid(), root=tmp_path)
    assert limit is not None and limit.source == "cgroup"
    assert limit.limit_mib == 8192 and limit.left_mib == 2048
    (folder / names[0]).write_text("max\n" if version == "v2" else f"{2**63 - 4096}\n")
    assert procs.cgroup_limit(os.getpid(), root=tmp_path) is None  # no limit


def test_a_relative_output_dir_is_followed_in_the_training_folder(tmp_path: Path) -> None:
    """The run started elsewhere with output_dir: saves/x; its trainer_log.jsonl is read from its folder."""
    from oomdoctor.facts.gpu import FakeGpuSource
    from oomdoctor.watch import Watcher

    run_dir = tmp_path / "run"
    (run_dir / "saves" / "x").mkdir(parents=True)
    (run_dir / "saves" / "x" / "trainer_log.jsonl").write_text(
        '{"current_steps": 7, "total_steps": 20, "loss": 1.25, "remaining_time": "0:00:13"}\n'
    )
    config = tmp_path / "train.yaml"
    config.write_text(
        "model_name_or_path: Qwen/Qwen3-0.6B\nstage: sft\ndataset: d\nmax_steps: 20\noutput_dir: saves/x\n"
    )
    training = _start([sys.executable, "-c", SLEEPER, str(config)], run_dir)
    try:
        watcher = Watcher(config, gpu_source=FakeGpuSource.unavailable())
        frame = watcher.poll()
        assert frame["pids"] == [training.pid]
        assert frame["step"] == 7 and frame["loss"] == 1.25 and frame["eta_s"] == 13.0
        assert watcher.output_dir == run_dir / "saves" / "x"
    finally:
        training.kill()
        training.wait()
