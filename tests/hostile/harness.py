"""Running one hostile case: ``oomdoctor.cli.main(argv)`` in a forked child of the test process.

A fork costs a millisecond (everything is already imported), yet gives each case what an in-process call
cannot: a wall-clock limit that also stops a case stuck in C code (a backtracking regular expression, a
blocking ``open`` of a FIFO), its own peak RSS (``wait4``'s rusage), and its own file descriptors for a
captured stderr. ``run_subprocess`` runs the same case as a real ``python -m oomdoctor.cli`` for a sample.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import signal
import stat
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

TIME_BOUND_S = 5.0
RSS_BOUND_MIB = 1024.0
KILL_AFTER_S = 8.0  # past the bound, so a slow case is reported as slow rather than as a hang
_ADDRESS_SPACE_CAP = 6 << 30  # a safety net for the machine; the RSS bound is what is asserted
_HASH_LIMIT = 64 << 20


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None
    stderr: str
    wall_s: float
    max_rss_mib: float
    killed: bool


def _child(argv: list[str], cwd: Path, err_path: Path) -> None:
    code = 97
    try:
        os.chdir(cwd)
        devnull = os.open(os.devnull, os.O_RDWR)
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(err, 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 lives as long as the child
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE_CAP, _ADDRESS_SPACE_CAP))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        from oomdoctor.cli import main

        try:
            code = int(main(argv))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
        except BaseException:
            traceback.print_exc()
            code = 96
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os._exit(code)


def run_forked(argv: list[str], cwd: Path, scratch: Path) -> Outcome:
    """``main(argv)`` in a forked child with ``cwd``; stderr captured in ``scratch`` (outside ``cwd``)."""
    err_path = scratch / f"stderr-{time.monotonic_ns()}"
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        _child(argv, cwd, err_path)
    killed = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > KILL_AFTER_S:
            os.kill(pid, signal.SIGKILL)
            killed = True
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.002)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    stderr = err_path.read_text(encoding="utf-8", errors="replace") if err_path.exists() else ""
    with contextlib.suppress(OSError):
        err_path.unlink()
    return Outcome(None if killed else code, stderr, wall, usage.ru_maxrss / 1024, killed)


def run_subprocess(argv: list[str], cwd: Path) -> Outcome:
    """The same case as a real command line, in a fresh interpreter."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "oomdoctor.cli", *argv], cwd=cwd, capture_output=True,
                              text=True, errors="replace", timeout=KILL_AFTER_S + 5, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired as err:
        return Outcome(None, str(err.stderr or ""), time.monotonic() - started, 0.0, True)
    return Outcome(done.returncode, done.stderr, time.monotonic() - started, 0.0, False)


def snapshot(folder: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``folder`` (links not followed) with what it is and its content's hash (size and
    mtime for files too big to hash quickly, such as a sparse 1.5 GB file)."""
    out: dict[str, tuple[object, ...]] = {}
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = Path(root) / name
            rel = str(path.relative_to(folder))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = (
                    "file",
                    st.st_size,
                    _digest(path) if st.st_size <= _HASH_LIMIT else st.st_mtime_ns,
                )
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode), st.st_mtime_ns)
    return out


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
