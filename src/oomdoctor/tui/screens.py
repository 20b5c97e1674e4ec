"""Screens: the run picker, the diagnosis screen (facts, questions, proposal, history) and the dialogs.

Screens render the session and turn keys into requests to the app; the app runs the core in workers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import (
    Button,
    Checkbox,
    DataTable,
    Footer,
    Input,
    ProgressBar,
    Static,
    TabbedContent,
    TabPane,
    Tabs,
)

from oomdoctor.discover import display_path
from oomdoctor.i18n import Lang, pick
from oomdoctor.tui import messages
from oomdoctor.tui.base import BACK_KEYS, DoctorModal, DoctorScreen
from oomdoctor.tui.bindings import bind
from oomdoctor.tui.render import diff_lines, display_command
from oomdoctor.tui.session import gpu_reason
from oomdoctor.tui.strings import t
from oomdoctor.tui.widgets import (
    MAX_ANSWERS,
    FactsView,
    HistoryTable,
    OomBanner,
    ProposalView,
    QuestionPanel,
    RunHeader,
    ShellCommand,
    findings_not_repeated,
    findings_renderable,
)

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Finding, Proposal


# ------------------------------------------------------------------------------------------------ picker
def run_label(config: Path | None, log: Path | None, cwd: Path) -> str:
    """``saves/x/ training_args.yaml + running_log.txt``: a run's files on one line that fits 80 columns."""
    if config is not None and log is not None and config.parent == log.parent:
        folder = display_path(config.parent, cwd)
        prefix = "" if folder in ("", ".") else folder.rstrip("/") + "/"
        return f"{prefix}{{{config.name}, {log.name}}}"
    parts = [display_path(p, cwd) for p in (config, log) if p is not None]
    return " + ".join(parts)


class PickerScreen(DoctorScreen):
    """The runs found in the current folder, newest first, and the bundled demo case."""

    BINDINGS = [
        bind("enter", "open", id="open"),
        bind("d", "demo", id="demo"),
        bind(BACK_KEYS, "back", id="back"),
        bind("escape", "back", id="back", show=False),
    ]

    @dataclass
    class RunPicked(Message):
        config: Path | None
        log: Path | None
        is_demo: bool = False

    def compose(self) -> ComposeResult:
        yield Static(id="picker-title", classes="title")
        yield Static(id="picker-status")
        yield DataTable(id="picker-table", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="picker-buttons"):
            yield Button("", id="picker-demo", variant="primary")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.call_later(self.refresh_view)  # the view fills in right after the screen is mounted

    async def refresh_view(self) -> None:
        if not self.composed:  # a worker reported before this screen composed: its mount draws it
            return
        session = self.doctor.session
        lang = self.lang
        self.query_one("#picker-title", Static).update(
            Text(t("picker_title", lang, folder=display_path(session.cwd, session.cwd) or "."), style="bold")
        )
        self.query_one("#picker-demo", Button).label = t("picker_demo_button", lang)
        status = self.query_one("#picker-status", Static)
        table = self.query_one("#picker-table", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        table.add_columns(t("picker_col_when", lang), t("picker_col_run", lang))
        scan = session.scan
        if scan is None:
            status.update(t("picker_scanning", lang, folder="."))
            return
        lines = []
        if not scan.runs:
            lines.append(t("picker_none", lang))
        if scan.stopped_early and not scan.cancelled:
            lines.append(t("picker_stopped_early", lang, entries=scan.entries_seen))
        status.update("\n".join(lines))
        for number, run in enumerate(scan.runs, start=1):
            table.add_row(str(number), run_label(run.config, run.log, session.cwd), key=str(number - 1))
        table.add_row("*", t("picker_demo_row", lang), key="demo")
        table.move_cursor(row=min(cursor, table.row_count - 1))
        table.focus()

    def _pick_row(self, key: str | None) -> None:
        scan = self.doctor.session.scan
        if key == "demo" or scan is None:
            self.action_demo()
            return
        if key is None:
            return
        run = scan.runs[int(key)]
        self.post_message(self.RunPicked(run.config, run.log))

    @on(DataTable.RowSelected, "#picker-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._pick_row(event.row_key.value)

    def action_open(self) -> None:
        table = self.query_one("#picker-table", DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            self._pick_row(key)

    @on(Button.Pressed, "#picker-demo")
    def action_demo(self) -> None:
        from oomdoctor.demo import demo_paths

        config, log = demo_paths()
        self.post_message(self.RunPicked(config, log, is_demo=True))

    def _run_beneath(self) -> bool:
        session = self.doctor.session
        return len(self.app.screen_stack) > 2 and (session.config is not None or session.log is not None)

    def action_back(self) -> None:
        if self._run_beneath():
            self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self._run_beneath()
        return True


# ------------------------------------------------------------------------------------------------ main
class MainScreen(DoctorScreen):
    """Facts, questions, one proposal at a time, and the session's history, for the run on screen."""

    BINDINGS = [
        bind("1", "answer(1)", id="answer", key_display="1-9"),
        *[bind(str(n), f"answer({n})", id=f"answer_{n}", show=False) for n in range(2, MAX_ANSWERS + 1)],
        bind("0", "skip_question", id="skip"),
        bind("a", "apply", id="apply"),
        bind("n", "next_proposal", id="next"),
        bind("N", "previous_proposal", id="previous"),
        bind("e", "explain", id="explain"),
        bind("c", "copy_command", id="copy"),
        bind("t", "trial", id="trial"),
        bind("m", "measure_lengths", id="measure"),
        bind("s", "cancel_measure", id="cancel_measure"),
        bind("escape", "cancel_measure", id="cancel_measure", show=False),
        bind("v", "compare", id="compare"),
        bind("r", "runs", id="runs"),
        bind("f", "show_tab('facts')", id="tab_facts", show=False),
        bind("p", "show_tab('proposal')", id="tab_proposal", show=False),
        bind("h", "show_tab('history')", id="tab_history", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield RunHeader(id="run-header")
        yield OomBanner(id="oom-banner")
        with TabbedContent(initial="proposal", id="tabs"):
            with TabPane("Facts", id="facts"):
                yield FactsView(id="facts-view")
            with TabPane("Proposal", id="proposal"):
                yield QuestionPanel(id="question-panel")
                yield ProposalView(id="proposal-view")
            with TabPane("History", id="history"):
                yield Static(id="history-empty")
                yield HistoryTable(id="history-table")
        with Horizontal(id="measure-status"):
            yield Static(id="measure-label")
            yield ProgressBar(id="measure-bar", show_eta=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.call_later(self.refresh_view)  # the view fills in right after the screen is mounted

    async def refresh_view(self) -> None:
        if not self.composed:  # a worker reported before this screen composed: its mount draws it
            return
        if not self.query("#tabs"):  # ... or after the app began to leave and took the widgets down
            return
        session = self.doctor.session
        lang = self.lang
        tabs = self.query_one("#tabs", TabbedContent)
        for pane_id in ("facts", "proposal", "history"):
            tabs.get_tab(pane_id).label = Text(t(f"tab_{pane_id}", lang))  # Text: "[f]" is not markup
        self.query_one(RunHeader).show(session, lang)
        self.query_one(OomBanner).show(session, lang)
        self.query_one(FactsView).show(session, lang, gpu_reason=gpu_reason(session, self.doctor.gpu_source))
        panel = self.query_one(QuestionPanel)
        pending = session.pending_questions
        if pending and session.diagnosis is not None:
            # numbered across the diagnoses of this run: the questions come one tier at a time
            asked = session.questions_done()
            await panel.show(pending[0], asked + 1, asked + len(pending), lang)
            panel.display = True
        else:
            panel.question = None
            panel.display = False
        view = self.query_one(ProposalView)
        view.show(session, lang)
        view.display = not pending
        on_proposal = self.query_one("#tabs", TabbedContent).active == "proposal"
        if not pending and on_proposal and (self.focused is None or isinstance(self.focused, Tabs)):
            view.focus()  # arrows and PageDown scroll it at once (at 80x24 it is longer than the screen)
        history = self.query_one(HistoryTable)
        history.show(session.history, session, lang)
        history.display = bool(session.history)
        empty = self.query_one("#history-empty", Static)
        empty.update(t("history_empty", lang))
        empty.display = not session.history
        self.show_measuring()
        self.refresh_bindings()

    def show_measuring(self) -> None:
        """The measuring line: what is happening and how far; hidden when nothing is being measured.
        Called for every (coalesced) progress report, so it touches only the line itself."""
        if not self.composed:  # a worker reported before this screen composed: its mount draws it
            return
        session = self.doctor.session
        status = self.query_one("#measure-status", Horizontal)
        status.display = session.measuring
        if session.measuring:
            label = self.query_one("#measure-label", Static)
            bar = self.query_one("#measure-bar", ProgressBar)
            if session.measure_total:
                label.update(
                    t("measure_progress", self.lang, done=session.measure_done, total=session.measure_total)
                )
                bar.update(total=session.measure_total, progress=session.measure_done)
            else:
                label.update(t("measure_loading", self.lang))
                bar.update(total=None)  # indeterminate while LLaMA-Factory and the tokenizer load

    # Actions ---------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        session = self.doctor.session
        pending = session.pending_questions
        proposal = session.current_proposal
        if action == "answer":
            number = int(cast(int, parameters[0])) if parameters else 1
            return bool(pending) and number <= min(len(pending[0].answers), MAX_ANSWERS)
        if action == "skip_question":
            return bool(pending)
        if action in ("apply", "explain", "next_proposal", "previous_proposal", "copy_command", "trial") and (
            pending or proposal is None
        ):
            return False
        if action == "apply":
            return session.apply_enabled()
        if action == "measure_lengths":
            return session.can_measure  # while measuring, Esc (stop) takes its place in the footer
        if action == "cancel_measure":
            return session.measuring
        if action in ("next_proposal", "previous_proposal"):
            return len(session.proposals) > 1
        if action == "compare":
            return any((d / "result.json").is_file() for d in session.trial_dirs())
        if action in ("copy_command", "trial"):
            return session.patch is not None and proposal is not None and session.patch_rule == proposal.rule
        return True

    def action_answer(self, number: int) -> None:
        self.query_one(QuestionPanel).choose(int(number))

    def action_skip_question(self) -> None:
        self.query_one(QuestionPanel).skip()

    def action_next_proposal(self) -> None:
        self.post_message(messages.ProposalStepped(1))

    def action_previous_proposal(self) -> None:
        self.post_message(messages.ProposalStepped(-1))

    def action_show_tab(self, pane_id: str) -> None:
        self.query_one("#tabs", TabbedContent).active = pane_id

    def action_measure_lengths(self) -> None:
        self.post_message(messages.MeasureRequested())

    def action_cancel_measure(self) -> None:
        self.post_message(messages.MeasureCancelRequested())

    def action_apply(self) -> None:
        session = self.doctor.session
        proposal = session.current_proposal
        if session.apply_enabled() is not True or proposal is None:
            return
        if session.proposal_measures:  # advice to measure: measure, there is nothing to write
            self.post_message(messages.MeasureRequested())
            return
        from oomdoctor.discover import suggest_trial_folder

        suggested = suggest_trial_folder(session.cwd, proposal.rule)
        same = session.same_change_written(proposal)

        def written(folder: object) -> None:
            if isinstance(folder, Path):
                self.post_message(messages.ApplyRequested(proposal, folder))

        self.app.push_screen(ApplyScreen(suggested, already=same), written)

    def action_explain(self) -> None:
        session = self.doctor.session
        proposal = session.current_proposal
        if proposal is not None:
            self.app.push_screen(ExplainScreen(proposal, findings_not_repeated(session)))

    def action_copy_command(self) -> None:
        patch = self.doctor.session.patch
        if patch is not None:
            script = patch.command_file or Path(patch.folder) / "command.sh"
            self.app.push_screen(CommandScreen(patch.command, script))

    def action_trial(self) -> None:
        session = self.doctor.session
        if session.patch is not None:
            entry = session.entry_for(session.patch.folder)
            if entry is not None:
                self.post_message(messages.TrialRequested(entry))

    def action_runs(self) -> None:
        self.post_message(messages.RunsRequested())

    def action_compare(self) -> None:
        self.post_message(messages.CompareRequested())


# ------------------------------------------------------------------------------------------------ dialogs
class ApplyScreen(DoctorModal):
    """Ask for the new folder (a suggestion filled in); refuse one that exists. b and Backspace type
    into the field here: Esc or the Cancel button close it."""

    BINDINGS = [bind("escape", "close", id="close")]

    def __init__(self, suggested: Path, *, already: Path | None = None) -> None:
        super().__init__()
        self.suggested = suggested
        self.already = already  # the same change was written there already, from the same run

    @property
    def cwd(self) -> Path:
        return self.doctor.session.cwd

    def compose(self) -> ComposeResult:
        lang = self.lang
        with Vertical(id="apply-dialog", classes="dialog"):
            yield Static(Text(t("apply_title", lang), style="bold"))
            if self.already is not None:
                already = t("apply_already", lang, folder=display_path(self.already, self.cwd))
                yield Static(Text(already, style="yellow"), id="apply-already")
            yield Static(t("apply_folder", lang))
            yield Input(display_path(self.suggested, self.cwd), id="apply-folder")
            yield Static(id="apply-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(t("apply_write", lang), id="apply-write", variant="primary")
                yield Button(t("apply_cancel", lang), id="apply-cancel")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#apply-folder", Input).focus()

    def _folder(self) -> Path | None:
        raw = self.query_one("#apply-folder", Input).value.strip()
        error = self.query_one("#apply-error", Static)
        if not raw:
            error.update(Text(t("apply_empty", self.lang), style="red"))
            return None
        folder = Path(raw).expanduser()
        if not folder.is_absolute():
            folder = self.cwd / folder
        if folder.exists():
            error.update(Text(t("apply_exists", self.lang, folder=raw), style="red"))
            return None
        return folder

    @on(Input.Submitted, "#apply-folder")
    @on(Button.Pressed, "#apply-write")
    def _write(self) -> None:
        folder = self._folder()
        if folder is not None:
            self.dismiss(folder)

    @on(Button.Pressed, "#apply-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


def rule_docs(rule_id: str, next_ids: list[str], lang: Lang) -> tuple[str, list[str]]:
    """The node's own documentation and the titles of the nodes it leads to, from the loaded rule set
    (cached by the engine); ids stand in for what the rule set does not hold."""
    try:
        from oomdoctor import text as bilingual  # rich's Text is this module's Text
        from oomdoctor.rules.loader import load_rules

        rules = load_rules()
    except Exception:  # the proposal is still worth showing without its docs
        return "", list(next_ids)

    def text(local: bilingual.Text) -> str:
        return local.pick(lang)

    docs = text(rules.get(rule_id).docs) if rule_id in rules.by_id else ""
    titles = [f"{text(rules.get(n).title)} ({n})" if n in rules.by_id else n for n in next_ids]
    return docs, titles


class ExplainScreen(DoctorModal):
    """Everything the rule says about this change, and what the readers noticed."""

    def __init__(self, proposal: Proposal, findings: list[Finding]) -> None:
        super().__init__()
        self.proposal = proposal
        self.findings = findings

    def compose(self) -> ComposeResult:
        lang = self.lang
        with Vertical(id="explain-dialog", classes="dialog"):
            with VerticalScroll(id="explain-body"):
                yield Static(Group(*explain_parts(self.proposal, self.findings, lang)))
            with Horizontal(classes="dialog-buttons"):
                yield Button(t("key_close", lang), id="explain-close", variant="primary")
        yield Footer(compact=True)

    @on(Button.Pressed, "#explain-close")
    def _close(self) -> None:
        self.dismiss(None)


def explain_parts(p: Proposal, findings: list[Finding], lang: Lang) -> list[RenderableType]:
    """Everything Explain shows of a proposal: the title and rule, the diff, the rule's texts, the files and
    environment it writes, the rule's own documentation and what it tries next, what the readers noticed."""
    parts: list[RenderableType] = [
        Text(t("explain_title", lang), style="bold"),
        Text(pick(p.title, lang), style="bold cyan"),
        Text(t("proposal_rule", lang, rule=p.rule), style="dim"),
        Text(""),
    ]
    diff = diff_lines(p, lang)
    if diff:
        parts += [
            Text(t("proposal_change", lang), style="bold"),
            Text("".join(f"{d.sign} {d.text}\n" for d in diff)),
        ]
    node_docs, next_titles = rule_docs(p.rule, p.next, lang)
    sections = [
        ("proposal_why", _paragraph(pick(p.why, lang))),
        ("proposal_cost", _paragraph(pick(p.cost, lang))),
        ("proposal_judge", _paragraph(pick(p.judge, lang))),
        ("proposal_already_on", _bullets(pick(i, lang) for i in p.already_on)),
        ("proposal_requires", _bullets(pick(i, lang) for i in p.requires)),
        ("explain_files", _bullets(p.files)),
        ("explain_env", _bullets(f"{k}={v}" for k, v in p.env.items())),
        ("explain_docs", _paragraph(node_docs)),
        ("explain_next", _bullets(next_titles)),
    ]
    for key, body in sections:
        if body:
            parts += [Text(t(key, lang), style="bold"), Text(body)]
    if findings:
        parts += [Text(t("explain_findings", lang), style="bold"), findings_renderable(findings, lang)]
    return parts


def _paragraph(text: str | None) -> str:
    return text + "\n" if text else ""


def _bullets(items: Iterable[str]) -> str:
    return "".join(f"• {item}\n" for item in items)


class TrialStepsScreen(DoctorModal):
    """Before a trial: how many optimizer steps (the run's schedule gives the default), and the probe
    switch (the longest samples first, so one step meets the worst batch; off: the first steps as they
    come). b and Backspace edit the number here: Esc or Cancel close it."""

    BINDINGS = [bind("escape", "close", id="close")]

    def __init__(self, default_steps: int, *, probe: bool) -> None:
        super().__init__()
        self.default_steps = default_steps
        self.probe = probe

    def compose(self) -> ComposeResult:
        from oomdoctor.trial.probe import DEFAULT_PROBE_STEPS

        lang = self.lang
        with Vertical(id="steps-dialog", classes="dialog"):
            yield Static(Text(t("steps_title", lang), style="bold"))
            yield Static(t("steps_question", lang, default=self.default_steps))
            steps = DEFAULT_PROBE_STEPS if self.probe else self.default_steps
            yield Input(str(steps), id="steps-input", restrict=r"[0-9]*", type="integer")
            yield Checkbox(t("steps_probe", lang), value=self.probe, id="steps-probe")
            yield Static(Text(t("steps_probe_hint", lang), style="dim"))
            yield Static(id="steps-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(t("steps_start", lang), id="steps-start", variant="primary")
                yield Button(t("apply_cancel", lang), id="steps-cancel")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#steps-input", Input).focus()

    @on(Checkbox.Changed, "#steps-probe")
    def _probe_changed(self, event: Checkbox.Changed) -> None:
        from oomdoctor.trial.probe import DEFAULT_PROBE_STEPS

        self.query_one("#steps-input", Input).value = str(
            DEFAULT_PROBE_STEPS if event.value else self.default_steps
        )

    @on(Input.Submitted, "#steps-input")
    @on(Button.Pressed, "#steps-start")
    def _start(self) -> None:
        raw = self.query_one("#steps-input", Input).value.strip()
        if not raw.isdigit() or int(raw) < 1:
            self.query_one("#steps-error", Static).update(Text(t("steps_bad", self.lang), style="red"))
            return
        self.dismiss((int(raw), self.query_one("#steps-probe", Checkbox).value))

    @on(Button.Pressed, "#steps-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


class CommandScreen(DoctorModal):
    """The training command in a box to select with the terminal's own selection, how to copy it there,
    and the script that holds it. The clipboard request is sent too, but never reported as done: many
    terminals (JupyterLab's, SSH) ignore it and nothing tells us."""

    def __init__(self, command: str, script: Path) -> None:
        super().__init__()
        self.command = command
        self.script = script

    def compose(self) -> ComposeResult:
        lang = self.lang
        cwd = self.doctor.session.cwd
        with Vertical(id="command-dialog", classes="dialog"):
            yield Static(Text(t("command_title", lang), style="bold"))
            yield Static(ShellCommand(display_command(self.command, cwd)), id="command-box")
            yield Static(t("command_how_to_copy", lang))
            yield Static(Text(t("command_script", lang, script=display_path(self.script, cwd)), style="bold"))
            yield Static(Text(t("command_clipboard_note", lang), style="dim"), id="command-note")
            with Horizontal(classes="dialog-buttons"):
                yield Button(t("key_close", lang), id="command-close", variant="primary")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.app.copy_to_clipboard(self.command)
        self.query_one("#command-close", Button).focus()

    @on(Button.Pressed, "#command-close")
    def _close(self) -> None:
        self.dismiss(None)


class ErrorScreen(DoctorModal):
    """A failure as one line (BadInput's message), never a traceback."""

    def __init__(self, message: str, *, title: str | None = None) -> None:
        super().__init__()
        self.message = message
        self.title_text = title

    def compose(self) -> ComposeResult:
        lang = self.lang
        with Vertical(id="error-dialog", classes="dialog"):
            yield Static(Text(self.title_text or t("error_title", lang), style="bold red"))
            yield Static(self.message, id="error-message")
            with Horizontal(classes="dialog-buttons"):
                yield Button(t("error_ok", lang), id="error-ok", variant="error")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#error-ok", Button).focus()

    @on(Button.Pressed, "#error-ok")
    def _ok(self) -> None:
        self.dismiss(None)
