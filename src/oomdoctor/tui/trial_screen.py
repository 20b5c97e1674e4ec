"""A short trial, live: memory against the card's total, utilisation, power, the step counter and the log
tail; at the end the result and the comparison with the trial it came from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.widgets import Footer, RichLog, Static

from oomdoctor.discover import display_path
from oomdoctor.patch.writer import COMMAND_NAME
from oomdoctor.tui.comparison import ComparisonView, baseline_row
from oomdoctor.tui.render import busiest_reading, fmt_mib, trial_outcome_line
from oomdoctor.tui.screens import BACK_KEYS, CommandScreen, DoctorScreen
from oomdoctor.tui.strings import t
from oomdoctor.tui.widgets import LevelChart

if TYPE_CHECKING:
    from oomdoctor.tui.session import TrialFeed


class LogTail(RichLog):
    """The trial's log, kept at its end when its height changes (the live panels give way to the result
    and the comparison when the trial ends), so the last lines, where a failure shows, stay in view."""

    def on_resize(self, event: events.Resize) -> None:
        super().on_resize(event)
        if self.auto_scroll:
            self.scroll_end(animate=False, immediate=False, x_axis=False)


class TrialScreen(DoctorScreen):
    BINDINGS = [
        Binding("s", "stop", "Stop", id="stop", tooltip="Stop the trial"),
        Binding("d", "rediagnose", "Proposals", id="rediagnose", tooltip="Diagnose the failed trial"),
        Binding("c", "copy_command", "Command", id="copy", tooltip="Show the training command"),
        Binding(BACK_KEYS, "back", "Back", id="back", tooltip="Back to the proposal"),
        Binding("escape", "back", "Back", id="back", tooltip="Back to the proposal", show=False),
    ]

    def __init__(self, feed: TrialFeed) -> None:
        super().__init__()
        self.feed = feed
        self._lines_shown = 0

    def compose(self) -> ComposeResult:
        yield Static(id="trial-title", classes="title")
        with Vertical(id="trial-live"):
            yield Static(id="trial-memory-label")
            yield LevelChart(id="trial-memory")
            with Horizontal(id="trial-small-charts"):
                with Vertical():
                    yield Static(id="trial-util-label")
                    yield LevelChart(id="trial-util", classes="small")
                with Vertical():
                    yield Static(id="trial-power-label")
                    yield LevelChart(id="trial-power", classes="small")
            yield Static(id="trial-step")
        yield Static(id="trial-result")
        with ScrollableContainer(id="trial-compare"):
            yield Static(id="trial-compare-table")
        # min_width: wrap to the widget, however narrow (RichLog's default of 78 overflows at 80 columns)
        yield LogTail(id="trial-log", max_lines=2000, wrap=True, markup=False, min_width=20)
        yield Footer(compact=True)

    async def on_mount(self) -> None:
        super().on_mount()
        await self.refresh_view()

    async def refresh_view(self) -> None:
        self.update_from_feed(full=True)

    def update_from_feed(self, *, full: bool = False) -> None:
        """Redraw from the feed; called for coalesced sample/line messages, so read everything new."""
        feed = self.feed
        lang = self.lang
        cwd = self.doctor.session.cwd
        self.query_one("#trial-title", Static).update(
            Text(t("trial_title", lang, folder=display_path(feed.out_dir, cwd)), style="bold")
        )
        history = feed.snapshot_history()
        last = history[-1] if history else None
        reading = busiest_reading(last)
        mem_label = self.query_one("#trial-memory-label", Static)
        if reading is None:
            mem_label.update(t("trial_starting", lang, command=display_path(feed.entry.config_path, cwd)))
        elif last is not None and last.source == "host_rss":
            mem_label.update(t("trial_memory_host", lang, used=fmt_mib(reading.memory_used_mib, lang)))
        else:
            mem_label.update(
                t(
                    "trial_memory",
                    lang,
                    used=fmt_mib(reading.memory_used_mib, lang),
                    total=fmt_mib(reading.memory_total_mib, lang),
                )
            )
        gpu = reading.gpu if reading is not None else None
        readings = [next((r for r in s.readings if r.gpu == gpu), None) for s in history]
        used = [r.memory_used_mib for r in readings if r is not None]
        utils = [r.util_pct for r in readings if r is not None and r.util_pct is not None]
        powers = [r.power_w for r in readings if r is not None and r.power_w is not None]
        self.query_one("#trial-memory", LevelChart).set_values(
            used, reading.memory_total_mib if reading is not None else None
        )
        self.query_one("#trial-util", LevelChart).set_values(utils, 100.0)
        self.query_one("#trial-power", LevelChart).set_values(powers, None)
        na = t("value_na", lang)
        self.query_one("#trial-util-label", Static).update(
            t("trial_util", lang, util=f"{utils[-1]:.0f} %" if utils else na)
        )
        self.query_one("#trial-power-label", Static).update(
            t("trial_power", lang, power=f"{powers[-1]:.0f} W" if powers else na)
        )
        progress = feed.progress
        if progress is not None and progress.steps_done is not None:
            step = t("trial_step", lang, step=progress.steps_done, total=progress.total_steps or "?")
        else:
            step = t("trial_step_unknown", lang)
        elapsed = max(0.0, self.doctor.clock() - feed.started_s)
        step += "  ·  " + t("trial_elapsed", lang, elapsed=f"{elapsed:.0f}")
        if feed.stopping and not feed.done:
            step += "  ·  " + t("trial_stopping", lang)
        self.query_one("#trial-step", Static).update(step)

        log = self.query_one("#trial-log", RichLog)
        for line in feed.drain_lines():
            log.write(line)

        result = self.query_one("#trial-result", Static)
        compare = self.query_one("#trial-compare", ScrollableContainer)
        live = self.query_one("#trial-live", Vertical)
        if feed.done:
            line = trial_outcome_line(feed, lang)
            passed = feed.result is not None and feed.result.ok
            if feed.failed:
                hint = "\n" + t("trial_still_failing", lang)
            elif passed:
                hint = "\n" + t("trial_passed_hint", lang)
            else:
                hint = ""
            result.update(Text(f"{line}{hint}", style="bold green" if passed else "bold red"))
            result.display = True
            if live.display:  # just finished: arrow keys scroll the comparison
                self.call_after_refresh(compare.focus)
            live.display = False
            if feed.comparison is not None and feed.comparison.rows:
                session = self.doctor.session
                baseline = baseline_row(session.origin_log_facts, session.origin_log, lang)
                view = ComparisonView(feed.comparison, lang, baseline=baseline)
                self.query_one("#trial-compare-table", Static).update(view)
                compare.display = True
            else:
                compare.display = False
        else:
            result.display = False
            live.display = True
            compare.display = False
        self.refresh_bindings()

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
        self.doctor.stop_trial()
        self.update_from_feed()

    def action_rediagnose(self) -> None:
        if self.feed.failed:
            self.app.pop_screen()
            self.doctor.rediagnose_trial(self.feed)

    def action_back(self) -> None:
        if self.feed.done:
            self.app.pop_screen()

    def action_copy_command(self) -> None:
        entry = self.feed.entry
        self.app.push_screen(CommandScreen(entry.command, entry.folder / COMMAND_NAME))
