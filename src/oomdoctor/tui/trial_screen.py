"""A short trial, chart first: memory over time per GPU in GiB against the card's limit, the peak, the
estimate's line and where the first update, validation and save happened; utilisation and power beside
it; step / total with the time left and the phase running; the log folded to a few lines. The charts stay
when the trial ends, above the result and every trial of this run compared."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, ScrollableContainer, Vertical, VerticalScroll
from textual.widgets import Footer, Static

from oomdoctor.discover import display_path
from oomdoctor.patch.writer import COMMAND_NAME
from oomdoctor.report import units
from oomdoctor.tui import messages
from oomdoctor.tui.base import BACK_KEYS, DoctorScreen
from oomdoctor.tui.bindings import bind
from oomdoctor.tui.charts import LINE_COLOURS, MARK_NAMES, USAGE_COLOURS, MemoryChart, Series, UsageChart
from oomdoctor.tui.comparison import ComparisonView, baseline_row
from oomdoctor.tui.render import busiest_reading, fmt_gib, trial_outcome_line
from oomdoctor.tui.screens import CommandScreen
from oomdoctor.tui.strings import t

if TYPE_CHECKING:
    from oomdoctor.tui.session import TrialFeed


LOG_FOLDED_LINES = 3
_PROGRESS_BAR = re.compile(r"\d+%\|.*\|\s*\d+/\d+")


def fold_progress_bars(lines: list[str]) -> list[str]:
    """A progress bar redrawn in place arrives as one line per redraw: keep the last of each run."""
    out: list[str] = []
    for line in lines:
        if out and _PROGRESS_BAR.search(line) and _PROGRESS_BAR.search(out[-1]):
            out[-1] = line
        else:
            out.append(line)
    return out


def usage_series(history: list[Any], gpu: str | None) -> tuple[Series, Series]:
    """``gpu``'s utilisation and power over the samples, each as (times, values), without the samples
    where the GPU could not say."""
    util: Series = ([], [])
    power: Series = ([], [])
    for snap in history:
        reading = next((r for r in snap.readings if r.gpu == gpu), None)
        if reading is None:
            continue
        for (times, values), value in ((util, reading.util_pct), (power, reading.power_w)):
            if value is not None:
                times.append(snap.time_s)
                values.append(value)
    return util, power


class TrialScreen(DoctorScreen):
    BINDINGS = [
        bind("s", "stop", id="stop"),
        bind("d", "rediagnose", id="rediagnose"),
        bind("c", "copy_command", id="copy"),
        bind("o", "toggle_log", id="toggle_log"),
        bind(BACK_KEYS, "back", id="back"),
        bind("escape", "back", id="back", show=False),
    ]

    def __init__(self, feed: TrialFeed) -> None:
        super().__init__()
        self.feed = feed
        self.log_open = False

    def compose(self) -> ComposeResult:
        yield Static(id="trial-title", classes="title")
        yield Static(id="trial-status")
        with Horizontal(id="trial-live"):
            yield MemoryChart(id="trial-memory")
            with Vertical(id="trial-side"):
                yield Static(id="trial-memory-label")
                yield Static(id="trial-util-label")
                yield Static(id="trial-power-label")
                yield UsageChart(id="trial-usage")
        yield Static(id="trial-result")
        with ScrollableContainer(id="trial-compare"):
            yield Static(id="trial-compare-table")
        with VerticalScroll(id="trial-log"):
            yield Static(id="trial-log-text")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.call_later(self.refresh_view)  # the view fills in right after the screen is mounted

    async def refresh_view(self) -> None:
        self.update_from_feed(full=True)

    def update_from_feed(self, *, full: bool = False) -> None:
        """Redraw from the feed; called for coalesced sample/line messages, so read everything new."""
        if not self.composed:  # a worker reported before this screen composed: its mount draws it
            return
        feed = self.feed
        lang = self.lang
        cwd = self.doctor.session.cwd
        self.query_one("#trial-title", Static).update(
            Text(t("trial_title", lang, folder=display_path(feed.out_dir, cwd)), style="bold")
        )
        history = feed.snapshot_history()
        self._draw_memory(history)
        self._draw_side(history)
        self.query_one("#trial-status", Static).update(self._status_line())
        self._draw_log()
        self._draw_result()
        self.refresh_bindings()

    def _status_line(self) -> Text:
        """``Step 3 of 8 · about 12 s left · validation · 14 s``."""
        feed, lang = self.feed, self.lang
        progress = feed.progress
        if progress is not None and progress.steps_done is not None:
            parts = [t("trial_step", lang, step=progress.steps_done, total=progress.total_steps or "?")]
        else:
            parts = [t("trial_step_unknown", lang)]
        eta = feed.eta_s()
        if eta is not None and not feed.done:
            parts.append(t("trial_eta", lang, eta=units.number(eta)))
        if feed.phase and not feed.done:
            parts.append(t("trial_phase", lang, phase=t(f"trial_phase_{feed.phase}", lang)))
        elapsed = max(0.0, self.doctor.clock() - feed.started_s)
        parts.append(t("trial_elapsed", lang, elapsed=units.number(elapsed)))
        if feed.stopping and not feed.done:
            parts.append(t("trial_stopping", lang))
        return Text("  ·  ".join(parts), style="bold")

    def _draw_memory(self, history: list[Any]) -> None:
        feed = self.feed
        series: dict[str, tuple[list[float], list[float]]] = {}
        limit = None
        host = bool(history) and history[-1].source == "host_rss"
        for snap in history:
            for reading in snap.readings:
                xs, ys = series.setdefault(reading.gpu, ([], []))
                xs.append(snap.time_s)
                ys.append(reading.memory_used_mib / 1024)
                if not host:
                    limit = reading.memory_total_mib / 1024
        peak = history[-1].peak_mib if history else None
        estimate = feed.entry.estimate_mib if not host else None
        self.query_one("#trial-memory", MemoryChart).set_data(
            series,
            limit_gib=limit,
            estimate_gib=estimate / 1024 if estimate else None,
            peak_gib=peak / 1024 if peak else None,
            marks=dict(feed.marks),
        )

    def _draw_side(self, history: list[Any]) -> None:
        lang = self.lang
        last = history[-1] if history else None
        reading = busiest_reading(last)
        label = self.query_one("#trial-memory-label", Static)
        cwd = self.doctor.session.cwd
        if reading is None:
            label.update(t("trial_starting", lang, command=display_path(self.feed.entry.config_path, cwd)))
        else:
            lines = []
            if last is not None and last.source == "host_rss":
                lines.append(t("trial_memory_host", lang, used=fmt_gib(reading.memory_used_mib)))
            else:
                lines.append(t("trial_memory", lang, used=fmt_gib(reading.memory_used_mib),
                               total=fmt_gib(reading.memory_total_mib)))  # fmt: skip
            label.update(self._legend(lines, last))
        self._draw_usage(history, reading.gpu if reading is not None else None)

    def _draw_usage(self, history: list[Any], gpu: str | None) -> None:
        """The busiest GPU's utilisation and power: the figures, each a legend line in its colour, and the
        chart of both under them when the column has the rows for it."""
        lang = self.lang
        util, power = usage_series(history, gpu)
        chart = self.query_one("#trial-usage", UsageChart)
        chart.set_data(util, power, right_s=max((s.time_s for s in history), default=0.0))
        na = t("value_na", lang)
        last_util = util[1][-1] if util[1] else None
        last_power = power[1][-1] if power[1] else None
        for key, value, figure in (
            ("util", last_util, t("trial_util", lang, util=units.percent(last_util, missing=na))),
            ("power", last_power, t("trial_power", lang, power=units.watts(last_power, missing=na))),
        ):
            mark = Text("━ ", style=USAGE_COLOURS[key]) if value is not None else Text("")
            self.query_one(f"#trial-{key}-label", Static).update(mark + Text(figure))

    def _legend(self, lines: list[str], last: Any) -> Text:
        """What the chart's lines and marks are, in their colours and the user's language."""
        lang, feed = self.lang, self.feed
        host = last is not None and last.source == "host_rss"
        text = Text("\n".join(lines) + "\n")
        text.append("━ " + t("chart_host" if host else "chart_gpu", lang) + "\n", style=LINE_COLOURS["gpu"])
        if not host and last is not None and last.readings:
            text.append("━ " + t("chart_limit", lang) + "\n", style=LINE_COLOURS["limit"])
        if last is not None and last.peak_mib is not None:
            text.append(
                "━ " + t("trial_peak", lang, peak=fmt_gib(last.peak_mib)) + "\n", style=LINE_COLOURS["peak"]
            )
        if feed.entry.estimate_mib and not host:
            text.append("━ " + t("trial_estimate", lang, estimate=fmt_gib(feed.entry.estimate_mib)) + "\n",
                        style=LINE_COLOURS["estimate"])  # fmt: skip
        marks = [self._mark_label(name) for name in MARK_NAMES if name in feed.marks]
        if marks and feed.milestones:  # a probe's marks say more: one a line
            text.append("".join(f"┃ {mark}\n" for mark in marks), style=LINE_COLOURS["mark"])
        elif marks:
            text.append("┃ " + ", ".join(marks) + " " + t("chart_x", lang) + "\n", style=LINE_COLOURS["mark"])
        text.rstrip()
        return text

    def _mark_label(self, name: str) -> str:
        """``validation 12.3``; with a probe's milestone ``validation 12.3 s (step 2, peak 9.57 GiB)``."""
        lang, feed = self.lang, self.feed
        label = f"{t(f'chart_{name}', lang)} {units.number(feed.marks[name], 1)}"
        milestone = feed.milestones.get(name)
        if milestone is None:
            return label
        label += " " + t("chart_x", lang)
        step = milestone.get("step")
        peak = milestone.get("peak_mib")
        detail = t("chart_milestone", lang, step=step if isinstance(step, int) else t("value_na", lang),
                   peak=fmt_gib(peak) if isinstance(peak, int | float) else t("value_na", lang))  # fmt: skip
        return f"{label} ({detail})"

    def _draw_log(self) -> None:
        """The log folded to its last lines (o unfolds it), a progress bar redrawn in place shown once."""
        feed = self.feed
        feed.drain_lines()
        lines = fold_progress_bars(list(feed.all_lines))
        shown = lines if self.log_open else lines[-LOG_FOLDED_LINES:]
        hint = t("trial_log_hint_open" if self.log_open else "trial_log_hint", self.lang, count=len(lines))
        self.query_one("#trial-log-text", Static).update(Text("\n".join(shown)))
        box = self.query_one("#trial-log", VerticalScroll)
        box.border_title = hint
        box.set_class(self.log_open, "-open")
        self.call_after_refresh(box.scroll_end, animate=False)

    def _draw_result(self) -> None:
        feed, lang = self.feed, self.lang
        result = self.query_one("#trial-result", Static)
        compare = self.query_one("#trial-compare", ScrollableContainer)
        live = self.query_one("#trial-live", Horizontal)
        if not feed.done:
            result.display = False
            compare.display = False
            return
        line = trial_outcome_line(feed, lang)
        passed = feed.result is not None and feed.result.ok
        if feed.failed and feed.outcome == "failed" and feed.failure:
            hint = "\n" + t("trial_failed_other", lang, error=feed.failure)
        elif feed.failed:
            hint = "\n" + t("trial_still_failing", lang)
        elif passed:
            hint = "\n" + t("trial_passed_hint", lang)
        else:
            hint = ""
        result.update(Text(f"{line}{hint}", style="bold green" if passed else "bold red"))
        result.display = True
        live.set_class(True, "-done")  # the charts stay, smaller, above the result
        if feed.comparison is not None and feed.comparison.rows:
            session = self.doctor.session
            baseline = baseline_row(session.origin_log_facts, session.origin_log, lang)
            view = ComparisonView(feed.comparison, lang, baseline=baseline)
            self.query_one("#trial-compare-table", Static).update(view)
            if not compare.display:
                self.call_after_refresh(compare.focus)  # arrow keys scroll the comparison
            compare.display = True
        else:
            compare.display = False

    def action_toggle_log(self) -> None:
        self.log_open = not self.log_open
        self._draw_log()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        feed = self.feed
        if action == "stop":
            return not feed.done
        if action == "rediagnose":
            return feed.failed
        if action == "back":
            return feed.done
        return True

    def action_stop(self) -> None:
        self.feed.stopping = True
        self.post_message(messages.TrialStopRequested())
        self.update_from_feed()

    def action_rediagnose(self) -> None:
        if self.feed.failed:
            self.app.post_message(messages.TrialRediagnoseRequested(self.feed))  # this screen leaves
            self.app.pop_screen()

    def action_back(self) -> None:
        if self.feed.done:
            self.app.pop_screen()

    def action_copy_command(self) -> None:
        entry = self.feed.entry
        self.app.push_screen(CommandScreen(entry.command, entry.folder / COMMAND_NAME))
