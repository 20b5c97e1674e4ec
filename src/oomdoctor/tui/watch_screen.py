"""Watch mode: a run that is still alive, next to it. Per GPU (or host memory under its limit, without a GPU) a
live memory chart with the limit, the peak so far and the estimate's line for each coming phase; the step,
the coming validation and save; the early warnings. When the run ends the screen turns into the diagnosis
of its log, the first warning kept above it. Frames come from the headless ``oomdoctor.watch.Watcher``,
polled in a thread worker; the screen only draws them."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.message import Message
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from oomdoctor.report import units
from oomdoctor.tui import messages
from oomdoctor.tui.base import DoctorScreen
from oomdoctor.tui.bindings import bind
from oomdoctor.tui.strings import t

HISTORY_POINTS = 600  # ten minutes at the default rate
PHASE_COLORS = {"eval": "magenta", "longest_batch": "cyan", "save": "blue"}


class MemoryPlot(PlotextPlot):
    """One memory over time: used, the limit, the peak so far, and where each coming phase would put it."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pool_name = name
        self.times: deque[float] = deque(maxlen=HISTORY_POINTS)
        self.used: deque[float] = deque(maxlen=HISTORY_POINTS)
        self.pool: dict[str, Any] = {}

    def add(self, time_s: float, pool: dict[str, Any]) -> None:
        if pool["used_mib"] is not None:  # None: the estimate alone (a log without memory readings)
            self.times.append(time_s)
            self.used.append(pool["used_mib"])
        self.pool = pool
        self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        phases = self.pool.get("phase_lines_mib") or {}
        if not self.times and not phases:
            return
        if self.times:
            plt.plot(list(self.times), list(self.used), color="green", marker="braille")
        levels = [(self.pool.get("limit_mib"), "red"), (self.pool.get("peak_mib"), "yellow")]
        levels += [(level, PHASE_COLORS.get(phase, "white")) for phase, level in phases.items()]
        for level, color in levels:
            if level is not None:
                plt.hline(level, color)
        plt.ylim(0, max(level or 0.0 for level, _ in levels) * 1.05 or 1.0)
        plt.xlabel("s")
        self.refresh()


class WatchScreen(DoctorScreen):
    DEFAULT_CSS = """
    WatchScreen #watch-charts { height: 1fr; min-height: 10; }
    WatchScreen .watch-chart { width: 1fr; }
    WatchScreen #watch-warnings { height: auto; max-height: 12; }
    WatchScreen #watch-ended { height: 1fr; overflow-y: auto; }
    """
    BINDINGS = [
        bind("d", "diagnose", id="watch_diagnose"),
        bind("escape", "back", id="watch_back"),
    ]

    @dataclass
    class FramePolled(Message):
        """One a second; only the newest pending one is drawn."""

        frame: dict[str, Any]

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, WatchScreen.FramePolled)

    def __init__(self, config: Path, log: Path | None, *, interval_s: float = 1.0) -> None:
        super().__init__()
        self.config = config
        self.log_path = log
        self.interval_s = interval_s
        self.frame: dict[str, Any] | None = None
        self.final: Any = None
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(id="watch-title", classes="title")
        yield Static(id="watch-status")
        with Horizontal(id="watch-charts"):
            pass
        yield Static(id="watch-legend")
        with ScrollableContainer(id="watch-warnings"):
            yield Static(id="watch-warnings-text")
        with Vertical(id="watch-ended"):
            yield Static(id="watch-diagnosis")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#watch-ended", Vertical).display = False
        self.follow()
        self.call_later(self.refresh_view)  # the view fills in right after the screen is mounted

    def on_unmount(self) -> None:
        self._stop.set()

    @work(thread=True, exclusive=True, exit_on_error=False, group="watch")
    def follow(self) -> None:
        from oomdoctor.facts.gpu import NvmlSource
        from oomdoctor.watch import Watcher

        source = self.doctor.gpu_source or NvmlSource()
        watcher = Watcher(self.config, log_path=self.log_path, gpu_source=source)
        while not self._stop.is_set():
            frame = watcher.poll()
            self.final = watcher.final
            self.post_message(self.FramePolled(frame))
            if frame["ended"] or self._stop.wait(self.interval_s):
                return

    @on(FramePolled)
    async def _frame_polled(self, event: FramePolled) -> None:
        self.frame = event.frame
        await self._add_points(event.frame)
        await self.refresh_view()

    async def _add_points(self, frame: dict[str, Any]) -> None:
        charts = self.query_one("#watch-charts", Horizontal)
        gpus = [p for p in frame["pools"] if p["kind"] == "gpu"]
        for pool in gpus or [p for p in frame["pools"] if "phase_lines_mib" in p]:
            plots = [w for w in charts.query(MemoryPlot) if w.pool_name == pool["name"]]
            if not plots:
                plots = [MemoryPlot(pool["name"], classes="watch-chart")]
                await charts.mount(plots[0])
            plots[0].add(frame["elapsed_s"], pool)

    async def refresh_view(self) -> None:
        lang = self.lang
        frame = self.frame
        self.query_one("#watch-title", Static).update(
            Text(t("watch_screen_title", lang, config=self.config.name), style="bold")
        )
        self.query_one("#watch-legend", Static).update(Text(t("watch_legend", lang), style="dim"))
        status = self.query_one("#watch-status", Static)
        if frame is None:
            status.update(t("watch_starting", lang))
            return
        status.update(self._status(frame))
        self.query_one("#watch-warnings-text", Static).update(self._warnings(frame))
        ended = self.query_one("#watch-ended", Vertical)
        if frame["ended"]:
            ended.display = True
            self.query_one("#watch-charts", Horizontal).display = False
            self.query_one("#watch-diagnosis", Static).update(self._diagnosis())

    def _status(self, frame: dict[str, Any]) -> str:
        lang = self.lang
        if not frame["alive"] and not frame["ended"]:
            return t("watch_waiting", lang)
        na = t("value_na", lang)
        loss = units.number(frame["loss"], 4, missing=na)
        status = t("watch_status", lang, step=frame["step"] if frame["step"] is not None else na,
                   total=frame["total_steps"] or na, loss=loss, eval=frame["next_eval_step"] or na,
                   save=frame["next_save_step"] or na, pids=", ".join(map(str, frame["pids"])) or na)  # fmt: skip
        if frame.get("log_only") and not frame["ended"]:  # no process here: say so
            age = units.number(frame["log_age_s"] or 0)
            status += "\n" + t("watch_log_only", lang, file=frame["log_file"] or na, age=age)
        return status

    def _warnings(self, frame: dict[str, Any]) -> Text:
        lang = self.lang
        text = Text()
        if frame["warnings"]:
            for w in frame["warnings"]:
                text.append(f"! {w['text'][lang]}\n", style="bold yellow")
                text.append(f"  {w['act'][lang]}\n")
        elif frame["alive"]:
            from oomdoctor.watch.render import has_readings

            if has_readings(frame):
                text.append(t("watch_no_warning", lang) + "\n", style="green")
            else:
                text.append(t("watch_no_readings", lang) + "\n", style="dim")
        if frame["history"]:
            first = frame["history"][0]
            text.append(t("watch_first_warning", lang, elapsed=units.number(first["time_s"]),
                          text=first["text"][lang]) + "\n", style="dim")  # fmt: skip
        return text

    def _diagnosis(self) -> Text:
        from oomdoctor.report.diagnosis import report

        lang = self.lang
        head = t("watch_ended", lang)
        body = (
            report(self.final, lang) if self.final is not None else str((self.frame or {}).get("diagnosis"))
        )
        return Text(f"{head}\n\n{body}")

    def action_diagnose(self) -> None:
        """Open the log in the diagnosis view (proposals, patch, trial)."""
        self._stop.set()
        self.app.post_message(messages.DiagnoseRequested(self.config, self.log_path))  # this screen leaves
        self.dismiss()

    def action_back(self) -> None:
        self._stop.set()
        self.dismiss()
