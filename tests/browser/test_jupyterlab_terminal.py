"""``oomdoctor demo`` in a real JupyterLab terminal, in Debian's Chromium driven by Playwright.

JupyterLab is started on loopback by the test, a terminal opened, the command typed, and the flow walked by
keys and clicks the way a user in a notebook would: apply, the command dialog, back (b, never Esc twice: the
browser takes Esc), a trial, a second change and its trial, the comparison. Each step is checked on the
terminal's own text (xterm.js's DOM renderer) and saved as a screenshot (``BROWSER_SCREENSHOTS`` names a
folder to keep them in; the README's pictures come from here).

The trials launch a stand-in for ``llamafactory-cli`` (``tests/fixtures/fake_launcher.py``, put first on the
terminal's PATH): the demo's model is not on this machine, and what is under test here is the terminal, the
keys and the screens; the real runner is tested in tests/integration.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
FAKE_LAUNCHER = REPO / "tests" / "fixtures" / "fake_launcher.py"
CHROMIUM_NAMES = ("chromium", "chromium-browser")
STEP_TIMEOUT_MS = 20_000
PROMPT = "browser-test$ "


def _chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _missing() -> str | None:
    """Why the test cannot run here, or None."""
    if _chromium() is None:
        return "Debian's chromium is not installed (scripts/browser-test-env installs it)"
    for module in ("playwright.sync_api", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            return f"{module.split('.')[0]} is not installed in this venv (scripts/browser-test-env)"
    if shutil.which("oomdoctor", path=str(Path(sys.executable).parent)) is None:
        return "the oomdoctor command is not installed in this venv"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _terminal_env(tmp: Path) -> dict[str, str]:
    """The environment JupyterLab hands its terminals: this checkout's code, the venv's commands, the
    stand-in launcher first on PATH, a settings folder that picks xterm.js's DOM renderer (its text can
    be read back: xterm.js's screen-reader rows), English, and nothing from the user's own Jupyter setup."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "llamafactory-cli"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LAUNCHER}" "$@"\n', encoding="utf-8")
    launcher.chmod(0o755)
    settings = tmp / "lab-settings" / "@jupyterlab" / "terminal-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(
        json.dumps({"fontSize": 13, "cursorBlink": False, "screenReaderMode": True}), encoding="utf-8"
    )
    # the terminal's shell without the machine's profile (it may reset PATH), with a prompt to wait for
    config = tmp / "jupyter-config"
    config.mkdir()
    (config / "jupyter_server_config.json").write_text(
        json.dumps(
            {"ServerApp": {"terminado_settings": {"shell_command": ["bash", "--noprofile", "--norc"]}}}
        ),
        encoding="utf-8",
    )
    notices = tmp / "lab-settings" / "@jupyterlab" / "apputils-extension"
    notices.mkdir(parents=True)
    (notices / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false"}), encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTEST", "TEXTUAL"))}
    env.update(
        PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"),
        JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),
        JUPYTER_DATA_DIR=str(tmp / "jupyter-data"),
        SHELL="/bin/bash",
        PS1=PROMPT,
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        FAKE_STEP_S="0.4",  # the stand-in's seconds per step: the live panels are on screen a while
        FAKE_CHILD_MB="400",  # and it holds some memory, so the chart has a line to draw
        HF_HUB_OFFLINE="1",
    )
    return env


@contextlib.contextmanager
def jupyterlab(tmp: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on loopback with a token; yields (base url, token) once it answers."""
    port, token = _free_port(), "oomdoctor-browser-test"
    root = tmp / "work"
    root.mkdir()
    log = (tmp / "jupyterlab.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=root, env=_terminal_env(tmp), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "JupyterLab did not start: " + (tmp / "jupyterlab.log").read_text(errors="replace")
                    ) from None
                time.sleep(0.3)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


class Terminal:
    """The JupyterLab terminal in the page: its text (xterm.js's screen-reader rows, one per terminal
    row), keys, clicks at a character's cell, screenshots."""

    def __init__(self, page: Any, shots: list[Path], folder: Path) -> None:
        self.page = page
        self.shots = shots
        self.folder = folder
        self.cols = 0

    def rows(self) -> list[str]:
        texts = self.page.locator(".jp-Terminal .xterm-accessibility-tree > div").all_inner_texts()
        return [t.replace("\xa0", " ") for t in texts]

    def text(self) -> str:
        return "\n".join(self.rows())

    def wait_for(self, *needles: str, timeout_ms: int = STEP_TIMEOUT_MS) -> str:
        deadline = time.monotonic() + timeout_ms / 1000
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                return text
            time.sleep(0.2)
        raise AssertionError(f"{needles} never showed; the terminal shows:\n{text}")

    def wait_for_match(self, pattern: str) -> tuple[str, ...]:
        deadline = time.monotonic() + STEP_TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            for row in self.rows():
                found = re.match(pattern, row.strip())
                if found:
                    return found.groups()
            time.sleep(0.2)
        raise AssertionError(f"{pattern} never showed:\n{self.text()}")

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)
            time.sleep(0.15)

    def type(self, text: str) -> None:
        self.page.keyboard.type(text, delay=20)

    def cell(self, row: int, col: int) -> tuple[float, float]:
        """The page coordinates of a character cell's centre."""
        box = self.page.locator(".jp-Terminal .xterm-screen").bounding_box()
        assert box is not None and self.cols
        height = box["height"] / len(self.rows())
        return box["x"] + (col + 0.5) * box["width"] / self.cols, box["y"] + (row + 0.5) * height

    def find(self, label: str) -> tuple[int, int]:
        for row, text in enumerate(self.rows()):
            if label in text:
                return row, text.index(label)
        raise AssertionError(f"{label!r} is not on the terminal:\n{self.text()}")

    def click_text(self, label: str) -> None:
        """Click on ``label`` where it is drawn (Textual reads the terminal's mouse reports)."""
        self.page.mouse.click(*self.cell(*self.find(label)))
        time.sleep(0.3)

    def shot(self, name: str) -> Path:
        path = self.folder / f"{name}.png"
        self.page.locator("#jp-main-dock-panel").screenshot(path=str(path))  # the terminal's tab
        self.shots.append(path)
        return path


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    shots: list[Path] = []
    folder = Path(os.environ.get("BROWSER_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    with jupyterlab(tmp_path) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(f"{base}/lab?token={token}", timeout=30_000)
            # as a user does: the launcher's Terminal card
            page.locator(".jp-LauncherCard", has_text="Terminal").first.click(timeout=30_000)
            page.wait_for_selector(".jp-Terminal .xterm-accessibility-tree", state="attached", timeout=30_000)
            page.locator(".jp-Terminal .xterm-screen").click()
            yield Terminal(page, shots, folder)
        finally:
            browser.close()
    for shot in shots:
        assert shot.stat().st_size > 10_000  # a picture of a screen, not an empty page


def test_demo_walked_in_a_jupyterlab_terminal(terminal: Terminal) -> None:
    terminal.wait_for(PROMPT)
    terminal.type("stty size\n")  # the terminal's columns: where a click on a character lands
    rows, cols = terminal.wait_for_match(r"^(\d+) (\d+)$")
    terminal.cols = int(cols)
    terminal.type("oomdoctor demo --trial-steps 8\n")
    text = terminal.wait_for("Proposal 1 of", "a Apply")
    assert "Out of memory" in text and "╸" in text  # box drawing arrived intact

    terminal.press("a")  # Apply: the folder dialog, Enter writes it
    terminal.wait_for("Write")
    terminal.press("Enter")
    text = terminal.wait_for("Written to trials/01-", "command.sh")
    terminal.shot("proposal")

    terminal.press("c")  # the command: to select, never "copied"
    text = terminal.wait_for("Shift+drag", "bash trials/01-")
    assert "copied" not in text
    terminal.press("b")  # closes it, no Esc
    terminal.wait_for("a Apply", "t Trial")

    terminal.click_text("History")  # a click on the tab: the change written
    terminal.wait_for("01-halve_micro_batch", "written", "Run that failed")
    terminal.click_text("Proposal")
    terminal.wait_for("Proposal 1 of")

    terminal.press("t")  # the short trial: how many steps, and the probe switch
    terminal.wait_for("How many optimizer steps", "Probe")
    terminal.click_text("Probe:")  # a click: back to the first steps as they come (no tokenizer here)
    terminal.click_text("Start")
    terminal.wait_for("Short trial of trials/01-", "Step ", "1st update")
    terminal.shot("trial")
    text = terminal.wait_for("Finished", timeout_ms=40_000)
    terminal.press("b")  # back, no Esc
    terminal.wait_for("Proposal 1 of")

    terminal.press("n")  # the next change, applied and tried too
    terminal.wait_for("Proposal 2 of")
    terminal.press("a")
    terminal.wait_for("Write")
    terminal.press("Enter")
    terminal.wait_for("Written to trials/02-")
    terminal.press("t")
    terminal.wait_for("How many optimizer steps")
    terminal.click_text("Probe:")
    terminal.click_text("Start")
    text = terminal.wait_for("Finished", "Trials compared", timeout_ms=40_000)
    assert "01-" in text and "02-" in text  # both trials side by side
    terminal.shot("compare")
    terminal.press("q")
    terminal.wait_for_match(r"^" + re.escape(PROMPT.strip()) + r"$")
