"""Every trial of this run side by side, under the run that failed: the core's comparison
(``oomdoctor.trial.compare``, what ``oomdoctor compare a b c`` prints) laid out for the screen.

The failed run is not a trial folder: its row comes from its log (what was in use when it ran out, the
step it reached, how it ended) as a ``TrialRow``, so the same outcome words are used for it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from oomdoctor.i18n import MESSAGES, Lang, msg, pick
from oomdoctor.report import units
from oomdoctor.tui.base import BACK_KEYS, DoctorScreen
from oomdoctor.tui.bindings import bind
from oomdoctor.tui.render import change_summary
from oomdoctor.tui.strings import t

if TYPE_CHECKING:
    from oomdoctor.facts.types import LogFacts
    from oomdoctor.trial.compare import Comparison, TrialRow

# A trial folder's name (NN-rule-trial) says which change it was: the table keeps it on one line (up to
# this long) and wraps the other columns. Below the table's width each trial becomes a block instead.
TRIAL_NAME_MAX_COLUMNS = 40
COMPARISON_TABLE_MIN_COLUMNS = 110
_NUMERIC = ("cmp_h_peak_gib", "cmp_h_wall", "cmp_h_eval_loss")
_HEADERS = ("cmp_h_trial", "cmp_h_change", "cmp_h_peak_gib", "cmp_h_wall", "cmp_h_outcome", "cmp_h_steps",
            "cmp_h_eval_loss", "cmp_h_delta")  # fmt: skip
FAILED_OUTCOMES = ("oom", "failed")
_TABLE_HEADERS = tuple(h for h in _HEADERS if h != "cmp_h_change")
CHANGE_MIN_COLUMNS = 34  # the change under a short trial name wraps at this width


def log_peak_mib(log: LogFacts) -> float | None:
    """What the failed run had in use when it ran out, as its log says: the process's use, else the
    card's (total less free), else what PyTorch had reserved, else the trainer's own VRAM record."""
    if log.process_in_use_mib is not None:
        return log.process_in_use_mib
    if log.capacity_mib is not None and log.free_mib is not None:
        return log.capacity_mib - log.free_mib
    if log.reserved_mib is not None:
        return log.reserved_mib
    return log.vram_allocated_gib * 1024 if log.vram_allocated_gib is not None else None


def baseline_row(log: LogFacts | None, path: Path | None, lang: Lang) -> TrialRow | None:
    """The run that failed, as the first row: from its log only (peak at failure, steps, outcome)."""
    from oomdoctor.trial.compare import TrialRow

    if log is None:
        return None
    if log.oom:
        outcome = "oom"
    elif log.other_error:
        outcome = "failed"
    else:
        outcome = "ok"
    return TrialRow(
        name=t("cmp_baseline_name", lang, log=path.name if path is not None else "log"),
        folder="",  # not a trial folder: no result.json to read milestones from
        outcome=outcome,
        peak_mib=log_peak_mib(log),
        peak_source="log",
        wall_s=log.train_runtime_s,
        steps_done=log.good_steps,
        total_steps=log.total_steps,
        eval_loss=log.eval_loss,
        phase=log.phase,
    )


def milestones_text(folder: str, lang: Lang) -> str:
    """``load ✓ update ✓ eval ✗`` from result.json's ``milestones`` (probe trials), else nothing."""
    from oomdoctor.discover import read_small_json

    record = read_small_json(Path(folder) / "result.json")
    items = record.get("milestones") if record is not None else None
    if not isinstance(items, list):
        return ""
    marks = {True: "✓", False: "✗"}
    parts = []
    for item in items:
        if not isinstance(item, dict) or item.get("applies") is False or item.get("passed") is None:
            continue
        name = str(item.get("name"))
        key = f"milestone_short_{name}"
        label = msg(key, lang) if key in MESSAGES else name
        parts.append(f"{label} {marks[bool(item.get('passed'))]}")
    return " ".join(parts)


def _change_cell(row: TrialRow, lang: Lang) -> str:
    change = row.change or {}
    changes = change.get("changes")
    if isinstance(changes, dict) and changes:
        return change_summary(changes)
    # No field changed (an environment variable, a file): the rule's title says what the change was. The
    # config's difference to the first trial is not this trial's change when it was made from elsewhere.
    title = change.get("title")
    return pick(title, lang) if isinstance(title, dict) else "-"


def _delta_cell(row: TrialRow, index: int, lang: Lang) -> str:
    """GiB, the screen's one unit; a failed trial's lower peak is not a saving and says so."""
    if index == 0:
        return msg("cmp_first", lang)
    if row.delta_peak_mib is None and row.delta_wall_s is None:
        return "-"
    parts = []
    if row.delta_peak_mib is not None:
        parts.append(units.gib(row.delta_peak_mib, signed=True))
    if row.delta_wall_s is not None:
        parts.append(t("cmp_delta_wall", lang, wall=units.number(row.delta_wall_s, 1, signed=True)))
    text = ("," if lang == "zh" else ", ").join(parts)
    if row.outcome in FAILED_OUTCOMES and (row.delta_peak_mib or 0) < 0:
        text += " " + t("cmp_failed_not_saving", lang)
    return text


def _steps_cell(row: TrialRow, lang: Lang) -> str:
    steps = f"{row.steps_done if row.steps_done is not None else '-'}/{row.total_steps or '-'}"
    marks = milestones_text(row.folder, lang) if row.folder else ""
    return f"{steps} {marks}" if marks else steps


class ComparisonView:
    """The trials of this run under the failed run, laid out for the width it gets: the table when it
    fits, one block per trial on a narrow terminal, never cut. Values and outcome words are the core's."""

    def __init__(
        self, comparison: Comparison | None, lang: Lang, *, baseline: TrialRow | None = None
    ) -> None:
        from oomdoctor.trial.compare import outcome_text

        self.lang = lang
        self.comparison = comparison
        self.baseline = baseline
        self.cells: list[dict[str, str]] = []
        rows = list(comparison.rows) if comparison is not None else []
        if baseline is not None:
            self.cells.append(
                self._cells(baseline, outcome_text(baseline, lang), t("cmp_baseline_delta", lang))
            )
        for i, row in enumerate(rows):
            self.cells.append(self._cells(row, outcome_text(row, lang), _delta_cell(row, i, lang)))

    def _cells(self, row: TrialRow, outcome: str, delta: str) -> dict[str, str]:
        is_baseline = row is self.baseline
        return {
            "cmp_h_trial": row.name,
            "cmp_h_change": t("cmp_baseline_change", self.lang)
            if is_baseline
            else _change_cell(row, self.lang),
            "cmp_h_peak_gib": units.gib(row.peak_mib, unit=False),
            "cmp_h_wall": units.number(row.wall_s, 1),
            "cmp_h_outcome": outcome,
            "cmp_h_steps": _steps_cell(row, self.lang),
            "cmp_h_eval_loss": "-" if row.eval_loss is None else f"{row.eval_loss:.4g}",
            "cmp_h_delta": delta,
        }

    def table(self) -> Table:
        """One row per run; the trial's name with its one change under it, so the change never needs a
        column of its own that would squeeze the numbers."""
        table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold", expand=False)
        longest_name = max((cell_len(c["cmp_h_trial"]) for c in self.cells), default=1)
        for key in _TABLE_HEADERS:
            table.add_column(
                msg(key, self.lang),
                overflow="fold",
                justify="right" if key in _NUMERIC else "left",
                # no_wrap: rich would otherwise shrink this column and lay the others out too wide
                no_wrap=key == "cmp_h_trial",
            )
        width = max(longest_name, CHANGE_MIN_COLUMNS)
        for i, cells in enumerate(self.cells):
            name = Text(cells["cmp_h_trial"], style="bold")
            change = textwrap.wrap(cells["cmp_h_change"], width=width) or ["-"]
            name.append("\n" + "\n".join(change), style="cyan")
            values = [cells[key] for key in _TABLE_HEADERS[1:]]
            table.add_row(name, *values, style="dim" if i == 0 and self.baseline is not None else "")
        return table

    def blocks(self) -> RenderableType:
        """Each row as a name line with its change, then its values as ``label: value`` pairs that wrap."""
        sep = ":" if self.lang == "zh" else ": "
        parts: list[RenderableType] = []
        for i, cells in enumerate(self.cells):
            name = Text(cells["cmp_h_trial"], style="bold")
            name.append(f"  {cells['cmp_h_change']}", style="cyan")
            keys = ["cmp_h_peak_gib", "cmp_h_wall", "cmp_h_steps", "cmp_h_eval_loss", "cmp_h_delta"]
            if i == 0 and self.baseline is not None:
                keys.remove("cmp_h_delta")
            pairs = [f"{msg(key, self.lang)}{sep}{cells[key]}" for key in keys]
            values = Text(
                "  ·  ".join(pairs) + "\n" + f"{msg('cmp_h_outcome', self.lang)}{sep}{cells['cmp_h_outcome']}"
            )
            parts += [name, Padding(values, (0, 0, 0, 2))]
        return Group(*parts)

    def tail(self) -> list[RenderableType]:
        comparison, lang = self.comparison, self.lang
        parts: list[RenderableType] = []
        rows = comparison.rows if comparison is not None else []
        sources = {r.peak_source for r in rows if r.peak_source}
        if rows:
            note = msg("cmp_peak_note_host" if sources == {"host_rss"} else "cmp_peak_note", lang)
            parts.append(Text(note, style="dim"))
        if self.baseline is not None:
            parts.append(Text(t("cmp_baseline_note", lang), style="dim"))
        if comparison is not None and comparison.warnings:
            parts.append(Text(msg("cmp_warnings", lang), style="bold yellow"))
            parts += [Text(f"  ! {w.text.pick(lang)}") for w in comparison.warnings]
        return parts

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(msg("cmp_trials_title", self.lang), style="bold")
        yield self.layout(console, options)
        yield from self.tail()

    def layout(self, console: Console, options: ConsoleOptions) -> RenderableType:
        """The table on a wide screen when the names are not too long, else one block per trial."""
        longest_name = max((len(c["cmp_h_trial"]) for c in self.cells), default=0)
        if options.max_width >= COMPARISON_TABLE_MIN_COLUMNS and longest_name <= TRIAL_NAME_MAX_COLUMNS:
            table = self.table()
            if Measurement.get(console, options, table).minimum <= options.max_width:
                return table
        return self.blocks()


def compare_run_trials(dirs: list[Path]) -> Any:
    """The core's comparison of the trial folders that have a result (oldest first), or None."""
    from oomdoctor.errors import BadInput
    from oomdoctor.trial.compare import compare_trials

    done = [d for d in dirs if (d / "result.json").is_file()]
    if not done:
        return None
    try:
        return compare_trials(done)
    except BadInput:
        return None


class ComparisonScreen(DoctorScreen):
    """Key v: every trial of this run under the failed run, read from the trial folders now (a trial
    finished in an earlier session counts too)."""

    BINDINGS = [
        bind(BACK_KEYS, "back", id="back"),
        bind("escape", "back", id="back", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="compare-scroll"):
            yield Static(id="compare-body")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.call_later(self.refresh_view)
        self.query_one("#compare-scroll", VerticalScroll).focus()

    async def refresh_view(self) -> None:
        session = self.doctor.session
        lang = self.lang
        comparison = compare_run_trials(session.trial_dirs())
        body = self.query_one("#compare-body", Static)
        if comparison is None:
            body.update(t("compare_none", lang))
            return
        baseline = baseline_row(session.origin_log_facts, session.origin_log, lang)
        body.update(ComparisonView(comparison, lang, baseline=baseline))

    def action_back(self) -> None:
        self.app.pop_screen()
