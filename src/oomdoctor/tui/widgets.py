"""Widgets of the diagnosis screen and the trial screen. Each one renders from the session and the app's
language; none of them computes anything the core did not."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Static

from oomdoctor.discover import display_path
from oomdoctor.i18n import Lang, pick
from oomdoctor.report import units
from oomdoctor.tui import messages
from oomdoctor.tui.render import (
    change_summary,
    diff_lines,
    display_command,
    effect_line,
    facts_rows,
    oom_summary,
)
from oomdoctor.tui.strings import t

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Finding, Proposal, Question
    from oomdoctor.text import Text as LocalText
    from oomdoctor.tui.session import HistoryEntry, Session

MAX_ANSWERS = 9  # number keys 1-9


def _heading(text: str) -> Text:
    return Text(text, style="bold")


class RunHeader(Static):
    """Which config and log are on screen, as paths relative to where the user started us."""

    def show(self, session: Session, lang: Lang) -> None:
        line = Text()
        if session.is_demo:
            line.append(f"{t('run_demo', lang)}  ", style="bold magenta")
        for label_key, path in (("run_config", session.config), ("run_log", session.log)):
            line.append(f"{t(label_key, lang)}: ", style="dim")
            line.append(display_path(path, session.cwd) if path is not None else t("run_none", lang))
            line.append("  ")
        line.rstrip()
        self.update(line)


class OomBanner(Static):
    """One line: where memory ran out and what filled it, red when it did."""

    def show(self, session: Session, lang: Lang) -> None:
        if session.loading or session.diagnosis is None:
            self.update(t("loading", lang) if session.loading else "")
            self.set_class(False, "-oom")
            return
        self.set_class(session.diagnosis.oom, "-oom")
        self.update(oom_summary(session.diagnosis, session.facts, lang, short=True))


def findings_not_repeated(session: Session) -> list[Finding]:
    """The diagnosis' findings less those a proposal already shows as "already on" (a guard that held
    is both a finding and the proposal's reason, word for word): the proposal view keeps it, where it
    says what it means for the change."""
    diagnosis = session.diagnosis
    if diagnosis is None:
        return []
    shown = [item for proposal in session.proposals for item in proposal.already_on]  # dicts: a list
    return [finding for finding in diagnosis.findings if finding.text not in shown]


def findings_renderable(findings: Iterable[Finding], lang: Lang) -> RenderableType:
    text = Text()
    for finding in findings:
        style = {"warning": "yellow", "error": "red"}.get(finding.severity, "")
        text.append("• ", style=style)
        text.append(pick(finding.text, lang) + "\n")
    return text


class FactsView(VerticalScroll):
    """Model, method, batch, sequence, precision, checkpointing, quantization, DeepSpeed, eval batch, GPU,
    OOM, and what the rules noticed."""

    def compose(self) -> ComposeResult:
        yield Static(id="facts-table")
        yield Static(id="facts-findings")

    def show(self, session: Session, lang: Lang, *, gpu_reason: str | None = None) -> None:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column(overflow="fold")
        if session.facts is None and session.diagnosis is None:
            self.query_one("#facts-table", Static).update(t("loading", lang) if session.loading else "")
            self.query_one("#facts-findings", Static).update("")
            return
        for label, value in facts_rows(session.facts, session.diagnosis, lang, gpu_reason=gpu_reason):
            table.add_row(label, value)
        self.query_one("#facts-table", Static).update(table)
        findings = findings_not_repeated(session)
        if findings:
            body = Group(_heading(t("facts_findings", lang)), findings_renderable(findings, lang))
            self.query_one("#facts-findings", Static).update(body)
        else:
            self.query_one("#facts-findings", Static).update("")


class QuestionPanel(Vertical):
    """A question the files cannot answer, with its answers as numbered buttons."""

    @dataclass
    class Answered(Message):
        key: str
        value: str

    @dataclass
    class Skipped(Message):
        key: str

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.question: Question | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="question-header")
        yield Static(id="question-text")
        yield Vertical(id="question-answers")
        yield Static(id="question-hint")

    async def show(self, question: Question, index: int, count: int, lang: Lang) -> None:
        self.question = question
        self.query_one("#question-header", Static).update(
            _heading(t("question_header", lang, index=index, count=count))
        )
        self.query_one("#question-text", Static).update(pick(question.text, lang))
        self.query_one("#question-hint", Static).update(Text(t("question_hint", lang), style="dim"))
        row = self.query_one("#question-answers", Vertical)
        await row.remove_children()
        buttons = [
            Button(
                f"{number} {pick(answer.label, lang)}", id=f"answer-{number}", classes="answer", compact=True
            )
            for number, answer in enumerate(question.answers[:MAX_ANSWERS], start=1)
        ]
        buttons.append(
            Button(t("question_skip", lang), id="answer-skip", classes="answer -skip", compact=True)
        )
        await row.mount_all(buttons)

    def choose(self, number: int) -> bool:
        """Answer with the ``number``-th answer (1-based); False when there is no such answer."""
        if self.question is None or not 1 <= number <= min(len(self.question.answers), MAX_ANSWERS):
            return False
        self.post_message(self.Answered(self.question.key, self.question.answers[number - 1].value))
        return True

    def skip(self) -> bool:
        if self.question is None:
            return False
        self.post_message(self.Skipped(self.question.key))
        return True

    @on(Button.Pressed, ".answer")
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button_id = event.button.id or ""
        if button_id == "answer-skip":
            self.skip()
        elif button_id.startswith("answer-"):
            self.choose(int(button_id.removeprefix("answer-")))


class AlternativeLine(Static):
    """One alternative under a proposal: a click shows it, the same request as the n / N keys."""

    def __init__(self, label: Text, *, number: int, step: int) -> None:
        super().__init__(label, classes=f"alternative alternative-{number}")
        self.step = step

    def on_click(self, event: events.Click) -> None:
        event.stop()
        if self.step:
            self.post_message(messages.ProposalStepped(self.step))


class ProposalView(VerticalScroll):
    """One proposal: the diff, why it targets that memory, the cost, the judge sentence, what is already
    on, the estimated effect, and the alternatives; after Apply, the folder and the exact command."""

    def compose(self) -> ComposeResult:
        # What was written comes first: after Apply the folder and command must be on screen at 80x24.
        yield Static(id="proposal-applied")
        yield Static(id="proposal-command")
        yield Static(id="proposal-body")
        yield Vertical(id="proposal-alternatives")

    def _show_alternatives(self, session: Session, lang: Lang) -> None:
        """The heading and one clickable line per alternative (n / N step through them by key)."""
        box = self.query_one("#proposal-alternatives", Vertical)
        box.remove_children()
        proposals = session.proposals
        if len(proposals) < 2:
            return
        lines: list[Widget] = [Static(_heading(t("proposal_alternatives", lang)))]
        for i, other in enumerate(proposals):
            chosen = i == session.proposal_index
            label = Text(
                f"{'▸ ' if chosen else '  '}{i + 1}. {pick(other.title, lang)}",
                style="bold" if chosen else "",
            )
            lines.append(AlternativeLine(label, number=i + 1, step=i - session.proposal_index))
        box.mount_all(lines)

    def show(self, session: Session, lang: Lang) -> None:
        proposal = session.current_proposal
        if proposal is None:
            self.query_one("#proposal-alternatives", Vertical).remove_children()
            body = "" if session.diagnosis is None else t("proposal_none", lang)
            self.query_one("#proposal-body", Static).update(body)
            self._show_applied(session, lang, written=False)
            return
        self.query_one("#proposal-body", Static).update(Group(*proposal_parts(session, proposal, lang)))
        self._show_alternatives(session, lang)
        self._show_applied(session, lang, written=session.patch_rule == proposal.rule)

    def _show_applied(self, session: Session, lang: Lang, *, written: bool) -> None:
        """After Apply (``written``: the patch is this proposal's): the folder and the exact command."""
        applied = self.query_one("#proposal-applied", Static)
        command = self.query_one("#proposal-command", Static)
        patch = session.patch
        if not written or patch is None:
            applied.update("")
            applied.display = False
            command.update("")
            command.display = False
            return
        folder = display_path(patch.folder, session.cwd)
        applied.update(
            Group(
                Text(t("proposal_applied", lang, folder=folder), style="bold green"),
                Text(t("proposal_command", lang, script=command_script_path(patch, session.cwd))),
            )
        )
        command.update(ShellCommand(display_command(patch.command, session.cwd)))
        command.display = True
        applied.display = True


def proposal_parts(session: Session, proposal: Proposal, lang: Lang) -> list[RenderableType]:
    """What the proposal view shows of one proposal: its place and rule, the title, the diff, why it can or
    cannot be applied here, and the explanation."""
    header = Text()
    header.append(
        t("proposal_header", lang, index=session.proposal_index + 1, count=len(session.proposals)),
        style="dim",
    )
    header.append("  ")
    header.append(t("proposal_rule", lang, rule=proposal.rule), style="dim")
    parts: list[RenderableType] = [header, Text(pick(proposal.title, lang), style="bold"), Text("")]
    parts += _diff_parts(proposal, lang)
    note = _apply_note(session, proposal, lang)
    if note is not None:
        parts.append(Text(note, style="yellow"))
    return parts + _explanation_parts(proposal, lang)


def _diff_parts(proposal: Proposal, lang: Lang) -> list[RenderableType]:
    """The config lines it changes, old in red and new in green."""
    diff = diff_lines(proposal, lang)
    if not diff:
        return []
    diff_text = Text()
    for line in diff:
        diff_text.append(f"{line.sign} {line.text}\n", style="red" if line.sign == "-" else "green")
    return [_heading(t("proposal_change", lang)), diff_text]


def _apply_note(session: Session, proposal: Proposal, lang: Lang) -> str | None:
    """Why Apply would not write this proposal as it stands: it measures first, it is manual, or no config."""
    if session.proposal_measures and session.config is not None:
        return t("proposal_measure_hint", lang)
    if proposal.manual:
        return t("proposal_manual", lang)
    if session.config is None:
        return t("proposal_no_config", lang)
    return None


def _explanation_parts(proposal: Proposal, lang: Lang) -> list[RenderableType]:
    """Why this memory, the cost, how to judge it, what is already on, the estimated effect, what it needs."""
    parts: list[RenderableType] = []
    for key, value in (
        ("proposal_why", _paragraph(pick(proposal.why, lang))),
        ("proposal_cost", _paragraph(pick(proposal.cost, lang))),
        ("proposal_judge", _paragraph(pick(proposal.judge, lang))),
        ("proposal_already_on", _bullets(proposal.already_on, lang)),
        ("proposal_effect", _paragraph(effect_line(proposal.effect, lang))),
        ("proposal_requires", _bullets(proposal.requires, lang)),
    ):
        if value:
            parts += [_heading(t(key, lang)), Text(value)]
    return parts


def _paragraph(text: str | None) -> str:
    return text + "\n" if text else ""


def _bullets(items: list[LocalText], lang: Lang) -> str:
    return "".join(f"• {pick(item, lang)}\n" for item in items)


def command_script_path(patch: object, cwd: object) -> str:
    """Where the command was saved (``trials/01-x/command.sh``), as the user would type it."""
    script = getattr(patch, "command_file", None) or getattr(patch, "folder", None)
    return display_path(script, cwd) if script is not None else ""  # type: ignore[arg-type]


class ShellCommand:
    """A shell command laid out to be selected with the terminal's own mouse selection: broken between
    words with `` \\`` continuations so the lines copied together still run as one command, never cut
    inside a word unless one word is wider than the screen."""

    def __init__(self, command: str) -> None:
        self.command = command

    def lines(self, width: int) -> list[str]:
        import shlex

        try:
            words = [shlex.quote(w) if w not in ("&&", "|", ";") else w for w in shlex.split(self.command)]
        except ValueError:
            return [self.command]
        lines: list[str] = []
        current = ""
        for word in words:
            candidate = f"{current} {word}" if current else word
            if current and len(candidate) + 2 > width:
                lines.append(current + " \\")
                current = "  " + word
            else:
                current = candidate
        lines.append(current)
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text("\n".join(self.lines(options.max_width)), style="bold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)


class HistoryTable(VerticalScroll):
    """The run that failed, then the changes made from it, one trial folder a row: where each came from
    (the chain of ``change.json`` parents), how its latest trial ended, its peak, what it changed. A table
    whose cells wrap, so nothing is cut at 80 or 120 columns."""

    def compose(self) -> ComposeResult:
        yield Static(id="history-body")

    def show(self, history: list[HistoryEntry], session: Session, lang: Lang) -> None:
        cwd = session.cwd
        parts: list[RenderableType] = []
        if session.origin_log is not None or session.origin_config is not None:
            origin = Text(t("history_origin", lang), style="bold")
            origin.append(" " + " + ".join(display_path(p, cwd) for p in (session.origin_config, session.origin_log)
                                           if p is not None), style="")  # fmt: skip
            parts.append(origin)
        if session.restored:
            parts.append(Text(t("history_restored", lang), style="dim"))
        if history:
            parts.append(Text(t("history_folder", lang, folder=display_path(history[0].folder.parent, cwd)),
                              style="dim"))  # fmt: skip
        folders = {str(entry.folder) for entry in history}
        rows = [
            (
                entry.folder.name,  # under trials/, which the line above names
                parent_label(entry.parent, folders, lang),
                t(f"outcome_{entry.outcome}", lang),
                units.gib(entry.peak_mib, missing=""),
                change_summary(entry.changes) or pick(entry.title, lang) or entry.rule,
            )
            for entry in history
        ]
        parts.append(HistoryLayout(rows, lang))
        self.query_one("#history-body", Static).update(Group(*parts))


class HistoryLayout:
    """The history's rows as a table when the screen is wide enough for the folder names whole, else one
    block per change (name and where it came from, then outcome, peak and change wrapped)."""

    TABLE_MIN_COLUMNS = 110

    def __init__(self, rows: list[tuple[str, str, str, str, str]], lang: Lang) -> None:
        self.rows = rows
        self.lang = lang

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lang = self.lang
        if options.max_width >= self.TABLE_MIN_COLUMNS:
            table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold", expand=True)
            for key in ("history_col_folder", "history_col_from"):
                table.add_column(t(key, lang), no_wrap=True)
            table.add_column(t("history_col_outcome", lang), ratio=1)
            table.add_column(t("history_col_peak", lang), justify="right", no_wrap=True)
            table.add_column(t("history_col_change", lang), ratio=2, overflow="fold")
            for row in self.rows:
                table.add_row(*row)
            yield table
            return
        sep = ":" if lang == "zh" else ": "
        for name, parent, outcome, peak, change in self.rows:
            head = Text(name, style="bold")
            head.append(f"  {t('history_col_from', lang)}{sep}{parent}", style="dim")
            yield head
            body = "  ·  ".join(v for v in (outcome, peak) if v) + "\n" + change
            yield Padding(Text(body), (0, 0, 0, 2))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)


def parent_label(parent: str | None, folders: set[str], lang: Lang) -> str:
    """Where a change was made from: the original run's config, or the trial it followed."""
    if not parent:
        return t("history_from_original", lang)
    path = Path(parent)
    if path.is_dir() or str(path) in folders:
        return path.name
    return t("history_from_original", lang)
