"""``oomdoctor watch``: frames from a scripted GPU, the no-GPU state, JSON, redraw, Ctrl+C."""

from __future__ import annotations

import io
import json

import pytest

from fixtures.verbs import run_verb
from oomdoctor.commands.watch import CLEAR, bar, watch
from oomdoctor.facts.gpu import FakeGpuSource
from oomdoctor.facts.types import GpuDevice, GpuProcess


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def two_cards() -> FakeGpuSource:
    cards = [
        GpuDevice(index=0, name="Tesla V100-SXM2-32GB", total_mib=32768.0, compute_capability=(7, 0),
                  processes=[GpuProcess(pid=4242, used_mib=28000.0, name="llamafactory-cli")]),
        GpuDevice(index=1, name="Tesla V100-SXM2-32GB", total_mib=32768.0),
    ]  # fmt: skip
    frames = [[(0, 28588.0, 32768.0, 97.0, 251.4), (1, 0.0, 32768.0, None, None)]]
    return FakeGpuSource(cards, frames=frames)


def test_one_frame_shows_cards_processes_and_host() -> None:
    out = io.StringIO()
    assert watch(two_cards(), lang="en", once=True, out=out) == 0
    text = out.getvalue()
    assert "GPU 0  Tesla V100-SXM2-32GB" in text and "GPU 1  Tesla V100-SXM2-32GB" in text
    assert "28,588 / 32,768 MiB" in text and "util 97%" in text and "power 251 W" in text
    assert "pid    4242" in text and "llamafactory-cli" in text and "28,000 MiB" in text
    assert "no compute processes" in text  # card 1
    assert "Host RAM" in text and "Ctrl+C stops this monitor only" in text
    assert CLEAR not in text
    zh = io.StringIO()
    watch(two_cards(), lang="zh", once=True, out=zh)
    assert "利用率 97%" in zh.getvalue() and "主机内存" in zh.getvalue()


def test_no_gpu_is_said_and_host_ram_shown() -> None:
    out = io.StringIO()
    watch(FakeGpuSource.unavailable("no NVIDIA driver (scripted)"), lang="en", once=True, out=out)
    assert "No NVIDIA GPU here: no NVIDIA driver (scripted)" in out.getvalue()
    assert " MiB" in out.getvalue().split("Host RAM")[1]


def test_json_frames() -> None:
    out = io.StringIO()
    watch(two_cards(), lang="en", as_json=True, frames=2, interval_s=0.01, out=out)
    frames = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(frames) == 2
    gpu0 = frames[0]["gpus"][0]
    assert gpu0["memory_used_mib"] == 28588.0 and gpu0["util_pct"] == 97.0 and gpu0["power_w"] == 251.4
    assert gpu0["processes"] == [{"pid": 4242, "name": "llamafactory-cli", "used_mib": 28000.0}]
    assert frames[0]["gpu_available"] is True and frames[0]["host"]["memory_total_mib"] > 0


def test_redraws_in_place_on_a_terminal() -> None:
    out = Tty()
    watch(two_cards(), lang="en", frames=3, interval_s=0.01, out=out)
    assert out.getvalue().count(CLEAR) == 3
    assert "every 0.01 s" in out.getvalue()


def test_ctrl_c_exits_zero() -> None:
    class Interrupting(FakeGpuSource):
        def sample(self):  # type: ignore[override]
            if self.samples_taken >= 1:
                raise KeyboardInterrupt
            return super().sample()

    source = Interrupting([GpuDevice(index=0, name="x", total_mib=100.0, used_mib=1.0)])
    out = io.StringIO()
    assert watch(source, lang="en", interval_s=0.01, out=out) == 0
    assert out.getvalue().count("GPU 0  x") == 1


def test_bar() -> None:
    assert bar(50.0, 100.0, width=10) == "[|||||     ]"
    assert bar(200.0, 100.0, width=4) == "[||||]"
    assert bar(None, 100.0, width=3) == "[   ]"


def test_verb_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_verb("watch", ["--once"]) == 0
    text = capsys.readouterr().out
    assert "Host RAM" in text
    assert run_verb("watch", ["--once", "--json"]) == 0
    frame = json.loads(capsys.readouterr().out)
    assert "gpu_available" in frame and frame["host"]["memory_used_mib"] > 0
    assert run_verb("watch", ["--interval", "0"]) == 2
    assert "--interval" in capsys.readouterr().err
