"""The log scanner: reads lines in order, once, and keeps what tells where memory ran out.

It is a small state machine so the same code serves a pasted excerpt, a 64 MiB tail and a streamed
full scan of a huge log. For each run in the file it keeps what the run was doing (the last marker,
the training progress), and at the first failure it freezes a snapshot of that state together with
the traceback that led to it; ``facts/log_phase.py`` turns the snapshot into a phase.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable

from oomdoctor.facts import launcher
from oomdoctor.facts.log_bar import MAX_COUNT_DIGITS, find_bar
from oomdoctor.facts.log_oom import first_message
from oomdoctor.facts.log_tables import OomForm, Tables, tables
from oomdoctor.facts.log_text import split_prefix, strip_ansi
from oomdoctor.i18n import both
from oomdoctor.lazyre import lazy
from oomdoctor.records import field, record, replace
from oomdoctor.text import Text

# The timing tail of a tqdm bar whose "n/total" part is not in the line (cut by the reporter, or wrapped onto
# the line before): "[02:06<01:20, 13.44s/it, pg=-.0119". Elapsed time and rate give the iterations done.
_BAR_TAIL = lazy(
    r"\[(?P<elapsed>\d+(?::\d{2}){1,2})<(?:\d+(?::\d{2}){1,2}|\?),\s*(?P<rate>\d+(?:\.\d+)?)(?P<unit>s/it|it/s)"
)
# A loss or gradient norm that is not a number ("'grad_norm': nan", "Loss: nan"): training diverged.
NONFINITE = lazy(r"(?:loss|Loss|grad_norm)'?\s?[:=]\s?'?(?:nan|-?inf)\b")
# Lines the rare run reports may be on (log_host_report.HINT, log_data_parallel.HINTS), tested here before those
# modules are imported, so a plain log never loads them; tests/unit/test_log_run_reports.py keeps the two in step.
RUN_REPORT_GATE = ("CPU Virtual", "n_gpu", "DataParallel", "nn/parallel/")
# the literals every NONFINITE match holds (its regex's own literals, "loss", are in every progress line)
NONFINITE_NEEDLES = (" nan", ":nan", "=nan", "'nan", " inf", ":inf", "=inf", "'inf", "-inf")
# A bar's count right before its timing tail, the bar itself gone: "307/46384 [40:22<104:17:25,  8.15s/it]".
_BARE_COUNT = lazy(r"(?:^|\s)(?P<n>\d{1,9})/(?P<total>\d{1,9})\s*\[")
# Training progress: two or more segments in a row that are bare bars (no description, no prefix) or training
# loss dicts, each on its own "\r"/"\n" segment, blank segments between them. This is most of a long log.
_EOL = r"[ \t]*(?:\r\n|[\r\n])(?:[ \t]*(?:\r\n|[\r\n]))*"
_ONE_BAR = r"[ \t]*\d{1,3}%\|[^|\r\n]*\|[ \t]*\d+/\d+[ \t]*\[[^\]\r\n]*\]"
_ONE_LOSS = r"\{'loss': [^\r\n{}]*\}"
_PROGRESS_RUN = lazy(rf"(?<![^\r\n])(?:(?:{_ONE_BAR}|{_ONE_LOSS}){_EOL}){{2,}}")
# transformers' notebook progress (Jupyter), as copied from the output cell: "[ 29/50 02:54 < 02:06, 0.17 it/s, Epoch 0.56/1]"
# A bare bar the page or the terminal cut after its blocks: only its percentage is left (" 10%|███████▌").
_CUT_BAR = lazy(r"^\s*(?P<pct>\d{1,3})%\|[^|\r\n]*\|?\s*$")
_NOTEBOOK_BAR = lazy(
    r"^\s*\[\s*(?P<n>\d+)/(?P<total>\d+) [\d:]+ < [\d:]+, [\d.]+ (?:it/s|s/it), Epoch [\d.]+/[\d.]+\]"
)
# "{'loss': '8.283', 'grad_norm': ...}" (transformers 5 prints strings, older prints numbers)
_DICT_VALUE = lazy(
    r"'(loss|eval_loss|train_runtime|train_loss|epoch)':\s*'?(-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))'?"
)
# Frame lines. Python: 'File "p.py", line 3, in f'; a cut excerpt may start at 'line 3, in f'. IPython /
# Jupyter (cloud notebooks): 'File ~/x/trainer.py:1539, in Trainer.train(self, ...)' and 'Cell In[10], line 1',
# with the running line marked '-> 1539 return ...' among numbered context lines.
FILE_LINE = lazy(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>[^\s(]+)')
IPYTHON_FILE_LINE = lazy(r"^\s*File (?P<path>[^\s\"].*?\.pyx?):(?P<line>\d+), in (?P<func>[^\s(]+)")
IPYTHON_CELL_LINE = lazy(r"^\s*Cell (?P<path>In\s*\[\d+\]), line (?P<line>\d+)")
FRAGMENT_LINE = lazy(r"^\s*line (?P<line>\d+), in (?P<func>[^\s(]+)\s*$")
# pytest's long traceback (a test that runs a trainer): ".venv/lib/.../transformers/trainer.py:1742: in
# _inner_training_loop", the running source line below it (marked ">" in the test's own frame).
PYTEST_LINE = lazy(r"^\s*(?P<path>[^\s:]+\.pyx?):(?P<line>\d+): in (?P<func>[^\s(]+)\s*$")


def match_frame_line(text: str) -> re.Match[str] | None:
    """The frame header in a traceback line, in any of the forms above."""
    if "File " in text:
        return FILE_LINE.match(text) or IPYTHON_FILE_LINE.match(text)
    if "line " in text:
        return FRAGMENT_LINE.match(text) or IPYTHON_CELL_LINE.match(text)
    if ": in " in text:
        return PYTEST_LINE.match(text)
    return None


# `rich` tracebacks (Typer / accelerate / many training scripts): frames in a box, "│ path.py:261 in main │",
# the header wrapped over two lines when the path is long ("│ .../modules.py: │" + "│ 268 in f │", or
# "│ .../trainer.py:1929 in │" + "│ _inner_training_loop │"), the running line marked "❱ 1445" (older: "> 105")
# among numbered context lines. They are rewritten into Python's own form so one frame parser serves both.
RICH_BOX = "│"
_RICH_FRAME = lazy(r"^(?P<path>\S.*?\.pyx?):(?P<line>\d+) in (?P<func>[^\s(]+)$")
_RICH_HEAD = lazy(r"^\S.*?\.pyx?:(?:\d+ in)?$")
# the start of a header whose path the box wrapped inside a name: an absolute path with no space and no ".py:"
_RICH_PATH_PART = lazy(r"^(?:/|~/|[A-Za-z]:\\)[^\s:]*[/\\][^\s:]*$")
_RICH_RUNNING = lazy(r"^(?:❱|>|→)\s*\d+\s+(?P<code>.*)$")
_BOX_ONLY = lazy(r"^[\s╭╮╰╯─│┃━┏┓┗┛]+$")
# A job platform that wraps every line of the process's output as its own log record: one or more
# timestamps, then level / source tags ("2023-09-14 21:27:58\t2023-09-14 21:27:58.000 [INFO] [Driver] ",
# Kubernetes "2024-05-01T10:00:00.123Z stdout F "). Taken off only where the rest is traceback text.
_STAMP_PREFIX = lazy(
    r"^(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[ \t]+)+"
    r"(?:(?:\[[^\]\s]{1,24}\]|stdout|stderr|F|P)[ \t]+){0,3}"
)
# vLLM's logger ("ERROR 06-10 10:55:03 [core.py:459] ", level, month-day time, [file:line]) prints each line of
# an engine's traceback behind it; taken off where the rest is traceback text.
_ENGINE_LOG_PREFIX = lazy(
    r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w.-]{1,64}:\d{1,6}\] "
)
# Ray's log deduplication appends " [repeated 3x across cluster]" to a line several workers printed.
_REPEATED_FRAME = lazy(r"^\s*\[Previous line repeated \d{1,9} more times?\]\s*(?=\S)")
_RAY_REPEATED = lazy(r"\s*\[repeated \d{1,9}x across cluster\]\s*$")

_EXCEPTION_LINE = lazy(
    r"^(?:[A-Za-z_][\w]*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit|Failure)\b(?::|\s*$)"
)
_LOG_RECORD = lazy(
    r"^\s*(?:\[(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b|\[\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d[ T]\d\d:|(?:INFO|WARNING|ERROR|DEBUG)[:\s])"
)
_ELISION = lazy(r"^\s*(?:\[\s*(?:\.\.\.|…)\s*\]|\.\.\.|…)\s*$")
# The mark a reporter leaves where they cut lines out of a pasted log ("[...]"; a bare "..." is also progress).
ELIDED_MARK = lazy(r"^\s*\[\.\.\.\]\s*$")

_BANNER_HINT = lazy(r" = |trainable params|all params|Process rank|Gradient checkpointing enabled")
_BANNER = {
    "instantaneous_batch_size": lazy(r"Instantaneous batch size per device = ([\d,]+)"),
    "gradient_accumulation_steps": lazy(r"Gradient Accumulation steps = ([\d,]+)"),
    "total_train_batch_size": lazy(
        r"Total train batch size \(w\. parallel, distributed & accumulation\) = ([\d,]+)"
    ),
    "total_steps": lazy(r"Total optimization steps = ([\d,]+)"),
    "trainable_params": lazy(r"Number of trainable parameters = ([\d,]+)"),
}
_NUM_EXAMPLES = lazy(r"Num examples = ([\d,]+)")
_LF_PARAMS = lazy(r"trainable params: ([\d,]+) \|\| all params: ([\d,]+)")
_ALL_PARAMS = lazy(r"all params: ([\d,]+)")
_PROCESS_RANK = lazy(r"Process rank: (\d+), world size: (\d+)")

TRACEBACK_HEADER = "Traceback (most recent call last)"
_MAX_TRACEBACK_LINES = 4000
_MAX_TRAILING_LINES = 400
# the sentences PyTorch's OOM message ends with, when a terminal or a page wrapped them onto lines of their own
_MESSAGE_ADVICE = lazy(
    r"max_split_size_mb|PYTORCH_CUDA_ALLOC_CONF|See documentation for Memory Management|fragmentation"
)
_RECENT_LINES = 8
_MAX_WARNINGS = 20
_CARD_LINE_CHARS = 1024
# A line longer than this is read as its first and last halves: every pattern then runs on a bounded text
# (a nohup.out of one endless progress line, a binary blob, a pasted base64 image).
MAX_LINE_CHARS = 16 * 1024
CLIP = " … "


_WS_RUN = lazy(r"\s{2,}")
_LAUNCHER_LINE_CHARS = 4096


def _launcher_world_size(text: str) -> int | None:
    """launcher.world_size_in on the line's start with whitespace runs made single (its separators allow
    whitespace on both sides of a choice of whitespace: on a long run that backtracks quadratically), and a
    count too long for int() (4,300 digits) read as none."""
    try:
        return launcher.world_size_in(_WS_RUN.sub(" ", text[:_LAUNCHER_LINE_CHARS]))
    except ValueError:
        return None


def _int(text: str) -> int | None:
    """A count as printed ("1,600,000"); None for a number no log means (and int() refuses 4,300 digits)."""
    digits = text.replace(",", "")
    return int(digits) if 0 < len(digits) <= MAX_COUNT_DIGITS and digits.isdecimal() else None


@record
class Snapshot:
    """What the run was doing when a failure began (copied at that moment)."""

    context: str | None = None  # load / after_load / train / eval / save / after_train / zero_init
    context_line: str | None = None  # the line that set it
    context_why: Text | None = None
    context_warned: bool = False  # that line is a warning from the phase's own code (marker ``warns``)
    context_in_step: bool = False  # that line is a load inside a training step (marker ``in_step``)
    context_owns_bars: bool = (
        False  # the bare bars after that line are its phase's own (marker ``owns_bars``)
    )
    train_steps: int | None = None  # last "n" of the Trainer's train bar: completed optimizer steps
    train_bar: str | None = None  # that bar as printed, for evidence
    train_steps_estimated: bool = False  # train_steps comes from a bar's elapsed time and rate, not its count
    train_pct: int | None = None  # the train bar's percentage, when its count is cut off (" 10%|████▌")
    bar_after_failure: bool = False  # the progress above was read from a bar printed after the error line
    loss_dicts: int = 0  # training loss dicts printed ({'loss': ...}): each follows a completed step
    training_started: bool = False
    eval_started: bool = False  # an evaluation began after training had started
    weights_loaded: bool = False
    elided: bool = False  # the excerpt left lines out ("[...]") before any sign of training
    # an export's command was seen (marker ``export``): the run merges or quantizes, it trains nothing
    export: bool = False


@record
class Failure:
    """A line saying memory ran out (or a cut traceback), with what led to it."""

    kind: str | None
    ran_out_of: str | None
    priority: int
    line: str | None  # the error line, trimmed
    message: str  # text the numbers are read from (the error line plus wrapped continuation lines)
    key: str
    rank: int | None
    host: str | None
    block: list[str]  # the traceback lines that led to it, outermost first
    snapshot: Snapshot
    pending_lines: int = 0  # continuation lines still to append to ``message``
    cut: bool = False  # a traceback without its error line
    after_seq: int = 0  # tracebacks opened before this failure have a lower ``seq``
    adopted: bool = False  # ``block`` is a traceback printed after the error line (see _adopt)
    # the words in a sentence, not an error line: a later message or traceback tells more
    mention: bool = False
    adopted_from: str | None = None  # the other process whose traceback (same failure) ``block`` is
    # Frames and source lines of the same process printed right after the error line: two writers interleaved
    # (the rest of a traceback the error line cut in two). The phase reads them when ``block`` tells nothing.
    trailing: list[str] = field(default_factory=list)
    trailing_open: bool = True  # still collecting ``trailing`` (until the process prints something else)
    later_bar_seen: bool = False  # a training bar was printed after the error line
    # A traceback of another rank that never reached its error line in the log (the excerpt or the log ends
    # first): where that rank was; read when neither ``block`` nor ``trailing`` tells the phase.
    sibling_block: list[str] = field(default_factory=list)
    sibling_key: str | None = None


@record
class _Traceback:
    """A traceback being read, per process, with the state the run was in when it opened."""

    lines: list[str]
    snapshot: Snapshot
    has_frames: bool = False
    header: bool = False  # opened by "Traceback (most recent call last)"
    seq: int = 0  # order in which tracebacks were opened
    key: str = ""
    names: str = ""  # IPython's header line, which names the exception's class before the frames


@record
class Run:
    """Everything read for one run (a file may hold several: appended nohup.out, restarts)."""

    snap: Snapshot = field(default_factory=Snapshot)
    train_total: int | None = None
    failure: Failure | None = None
    open_tracebacks: dict[str, _Traceback] = field(default_factory=dict)
    recent: dict[str, deque[str]] = field(default_factory=dict)
    last_traceback_key: str | None = None
    last_content_was_traceback: bool = False
    errors_seen: int = 0
    other_error: str | None = None
    setup_seen: bool = False
    launched: bool = False  # a launcher's own line: it started the run's processes (marker ``launch``)
    resumed: bool = False  # a line says the run resumes from a checkpoint (marker ``resume``)
    host_ram_percent: float | None = None  # the last host RAM report's share (facts/log_host_report.py)
    host_ram_used_gib: float | None = None
    data_parallel: bool = False  # the run trains on torch.nn.DataParallel (facts/log_data_parallel.py)
    data_parallel_gpus: int | None = None
    setup_line: str | None = None
    setup_why: Text | None = None
    warnings: list[str] = field(default_factory=list)
    tracebacks_opened: int = 0
    # per process, the last traceback a new one replaced before its error line (facts/log_child.py reads it)
    unfinished: dict[str, _Traceback] = field(default_factory=dict)
    rich_pending: dict[str, str] = field(default_factory=dict)  # a wrapped rich frame header, per process
    stamped_keys: set[str] = field(
        default_factory=set
    )  # processes whose traceback lines carry a platform stamp
    zero_stage: int | None = None  # DeepSpeed ZeRO stage the log printed (its optimizer banner, config dump)
    card_name: str | None = None  # first card name the log printed
    card_names: dict[int, str] = field(default_factory=dict)  # by GPU index, where the log says it
    alloc_retries: int = 0
    alloc_retries_max: int = 0
    # banner facts
    instantaneous_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    total_train_batch_size: int | None = None
    total_steps: int | None = None
    num_examples: int | None = None
    world_size: int | None = None
    launcher_world_size: int | None = None  # what a launcher line states (facts/launcher.py)
    trainable_params: int | None = None
    all_params: int | None = None
    gradient_checkpointing_logged: bool = False
    loading_shards: bool = False
    last_loss: float | None = None
    eval_loss: float | None = None
    train_runtime_s: float | None = None
    nonfinite_seen: bool = False  # a loss or grad_norm printed as nan / inf
    fsdp_seen: bool = False  # a line shows FSDP sharding the run (marker ``sharding: fsdp``)


class LogScanner:
    """Feed it lines (``feed_text`` or ``feed_lines``), then read ``result()``."""

    def __init__(self, table: Tables | None = None) -> None:
        self.t = table or tables()
        self.run = Run()
        self.last_failed: Run | None = None
        self.runs_seen = 1
        self.line_no = 0  # lines fed line by line (runs of progress lines count as a few)

    # ------------------------------------------------------------------ feeding
    def feed_text(self, text: str) -> None:
        """Feed a block of lines. A run of bare progress bars and training loss dicts (most of a big log) is
        read as its first bar, its last bar and its last loss dict, plus the count of dicts: the lines in
        between change nothing that those do not. ``feed_lines(split_lines(text))`` gives the same facts."""
        text = strip_ansi(text)
        pos = 0
        for run in _PROGRESS_RUN.finditer(text):
            body = run.group(0)
            first = find_bar(body)
            last_bar_at = body.rfind("%|")
            segment_start = max(body.rfind("\r", 0, last_bar_at), body.rfind("\n", 0, last_bar_at)) + 1
            last = find_bar(body, segment_start)
            if first is None or last is None or first.total != last.total:
                continue  # mixed bars (train and eval): leave them to the line-by-line path
            self.feed_lines(text[pos : run.start()].splitlines())
            kept = [(first.start, first.shown), (last.start, last.shown)]
            dicts = body.count("{'loss': ")
            if dicts:
                at = body.rfind("{'loss': ")
                kept.append((at, body[at : body.index("}", at) + 1]))
            self.feed_lines([line for _, line in sorted(dict(kept).items())])
            self.run.snap.loss_dicts += max(0, dicts - 1)
            if ("nan" in body or "inf" in body) and NONFINITE.search(body):
                self.run.nonfinite_seen = True  # a diverged step among the lines left out above
            pos = run.end()
        self.feed_lines(text[pos:].splitlines())

    def feed_lines(self, lines: list[str]) -> None:
        for line in lines:
            self.line_no += 1
            if len(line) > MAX_LINE_CHARS:
                half = MAX_LINE_CHARS // 2
                line = line[:half] + CLIP + line[-half:]
            if not line:
                self._blank("")
            elif line[0] == "[" or ": " in line[:64]:
                p = split_prefix(line)
                self._segment(p.key, p.rank, p.host, p.text)
            else:
                self._segment("", None, None, line)

    def read_bar(self, line: str) -> tuple[str, int, int] | None:
        """(description, n, total) of the progress bar a line starts with, as ``_segment`` would read it."""
        text = strip_ansi(line)
        if text[:1] == "[" or ": " in text[:64]:
            text = split_prefix(text).text
        bar = find_bar(text) if "%|" in text else None
        if bar is None:
            return None
        return bar.desc.strip().rstrip(":").strip(), bar.n, bar.total

    def bar_loop(self, desc: str, total: int) -> str:
        """What a bar with this description and total counts now: "train", "eval", "load" or "other"."""
        if desc:
            return self._described_loop(desc)
        run = self.run
        if run.train_total is not None:
            return "train" if total == run.train_total else "eval"
        return "train" if run.snap.context != "eval" else "eval"

    def _described_loop(self, desc: str) -> str:
        """What a described bar counts: "load", "train", "eval" or "other" (data preparation), by its first
        word, or by a training loop's description form (torchtune's "1|12|Loss: 2.31")."""
        t = self.t
        if any(desc.startswith(b) for b in t.load_bars):
            return "load"
        word = desc.split()[0].rstrip(":").lower()
        if word in t.train_bar_words or any(form.match(desc) for form in t.train_bar_forms):
            return "train"
        return "eval" if word in t.eval_bar_words else "other"

    def gap(self) -> None:
        """Lines were skipped here (head and tail of a big log): nothing carries across the gap."""
        run = self.run
        run.open_tracebacks.clear()
        run.recent.clear()
        run.last_content_was_traceback = False

    def result(self) -> tuple[Run, int]:
        """The run to report (the last one that failed, else the last one) and how many runs were seen."""
        run = self.run
        self._close_cut_traceback(run)
        for tb in sorted(run.open_tracebacks.values(), key=lambda t: t.seq):
            if run.failure is None or run.failure.cut or _adopt(run.failure, tb):
                break
        if run.failure is not None:
            _lend_sibling(run.failure, run.open_tracebacks.values())
        if run.failure is not None and run.failure.mention and not run.failure.adopted:
            # only the reporter's words say it ran out: the log they pasted shows how far the run had come
            run.failure.snapshot = replace(run.snap)
        if run.failure is None and self.last_failed is not None:
            return self.last_failed, self.runs_seen
        return run, self.runs_seen

    # ------------------------------------------------------------------ per line
    def _blank(self, key: str) -> None:
        tb = self.run.open_tracebacks.get(key)
        if tb is not None:
            tb.lines.append("")

    def _segment(self, key: str, rank: int | None, host: str | None, text: str) -> None:
        """One line (after its prefix); text glued after a progress bar is read as the next line, in a loop
        (3,000 bars glued on one line must not recurse 3,000 deep)."""
        rest: str | None = text
        while rest is not None:
            rest = self._segment_once(key, rank, host, rest)

    def _segment_once(self, key: str, rank: int | None, host: str | None, text: str) -> str | None:
        """Read one line; returns text glued after a bar that is still to be read, else None."""
        run = self.run  # the run the line started in (a marker below may start the next one)
        if not text.strip():
            self._blank(key)
            return None
        read = self._unwrapped(key, text)
        if read is None:
            return None
        text = read
        if not self._pending_message(run, key, text):
            self._trailing(run, key, text)
        # progress bars (possibly with more text glued after the bar, e.g. "...2.59s/it]Killed")
        if "%|" in text:
            bar = find_bar(text)
            if bar is not None:
                self._bar(bar.desc.strip().rstrip(":").strip(), bar.n, bar.total, bar.shown.strip())
                run.last_content_was_traceback = False
                rest = text[bar.end :]
                return rest if rest.strip() else None
            cut = _CUT_BAR.match(text)
            if cut is not None:
                # a fragment of a redraw: it may sit inside a traceback, which stays open
                self._bar("", None, None, text.strip()[:200], pct=int(cut.group("pct")))
                return None
        if self._progress_line(run, text) or self._traceback_line(run, key, rank, host, text):
            return None
        self._markers(text)
        if not _ELISION.match(text):
            self._plain_line(run, key, text)
        elif not run.snap.training_started and ELIDED_MARK.match(text):
            run.snap.elided = True
        return None

    def _unwrapped(self, key: str, text: str) -> str | None:
        """The line without a job platform's timestamp or a rich box (None: nothing more to read in it); a
        launch command in it sets the launcher's world size."""
        if text[:1].isdigit():
            text = self._unstamp(key, text)
        elif text[:1] in "IWEDC" and _ENGINE_LOG_PREFIX.match(text):
            text = self._unlogged(key, text)
        if "across cluster]" in text:
            text = _RAY_REPEATED.sub("", text)
        if "more time" in text and text.lstrip()[:1] == "[":
            text = _REPEATED_FRAME.sub("", text)  # "[Previous line repeated 2 more times]  File ..." glued
        if RICH_BOX in text or "╰" in text:
            rich = self._rich(key, text)
            if rich is None:
                return None
            text = rich
        if launcher.HINT.search(text):  # before any return: a launch command may sit in an error line
            self.run.launcher_world_size = _launcher_world_size(text) or self.run.launcher_world_size
        return text

    def _pending_message(self, run: Run, key: str, text: str) -> bool:
        """The lines after an OOM message that continue it (its GPU / capacity / PyTorch sentences); True when
        the line was taken into the message."""
        failure = run.failure
        if failure is not None and failure.pending_lines and key == failure.key:
            failure.pending_lines -= 1
            if failure.message.rstrip().endswith(":") and "out of memory" in text:
                # the header alone on its line ("torch.OutOfMemoryError:"), then its words
                failure.message = failure.message.rstrip() + " " + text.strip()
                return True
            if "Tried to allocate" not in text and (
                "GPU" in text or "capacity" in text or "PyTorch" in text or "Process" in text
            ):
                failure.message = failure.message + " " + text.strip()
                return True
        return False

    def _trailing(self, run: Run, key: str, text: str) -> None:
        """Frame lines and indented source lines the failing process prints right after its error line (the
        rest of a traceback another writer's lines cut in two) are kept with the failure; anything else the
        process prints ends them."""
        failure = run.failure
        if failure is None or not failure.trailing_open or failure.cut or key != failure.key:
            return
        if match_frame_line(text) is not None or (
            text[:1].isspace() and not _EXCEPTION_LINE.match(text.lstrip())
        ):
            if len(failure.trailing) < _MAX_TRAILING_LINES:
                failure.trailing.append(text)
            return
        if not _MESSAGE_ADVICE.search(text):  # the message's own advice, wrapped onto its line, ends nothing
            failure.trailing_open = False

    def _progress_line(self, run: Run, text: str) -> bool:
        """A bar's tail, a notebook bar or a Trainer metrics dict; True when the line is read."""
        if ("nan" in text or "inf" in text) and NONFINITE.search(text):
            run.nonfinite_seen = True
        if ("s/it" in text or "it/s" in text) and "<" in text:
            self._bar_tail(text)
        if ", Epoch " in text:
            m = _NOTEBOOK_BAR.match(text)
            if m:
                n, total = _int(m.group("n")), _int(m.group("total"))
                if n is not None and total is not None:
                    self._bar("", n, total, m.group(0).strip())
                run.last_content_was_traceback = False
                return True
        if "{'" in text and "':" in text and self._dict_line(text):
            run.last_content_was_traceback = False
            return True
        return False

    def _traceback_line(self, run: Run, key: str, rank: int | None, host: str | None, text: str) -> bool:
        """A traceback header or frame, an out-of-memory line or another exception; True when the line is read."""
        if TRACEBACK_HEADER in text:  # Python's header, or IPython's "OutOfMemoryError    Traceback (...)"
            tb = self._open_traceback(key, header=True)
            if not text.lstrip().startswith(TRACEBACK_HEADER):
                tb.names = text
            run.last_content_was_traceback = True
            return True
        frame = match_frame_line(text)
        if key and key not in run.open_tracebacks and (frame is not None or text[:1].isspace()):
            self._claim_unprefixed(run, key)
        if frame is not None:
            frame_tb = run.open_tracebacks.get(key) or self._open_traceback(key, header=False)
            frame_tb.lines.append(text)
            frame_tb.has_frames = True
            run.last_traceback_key = key
            run.last_content_was_traceback = True
            return True
        # out-of-memory forms (not in the source lines of an open traceback: `raise RuntimeError("No executable
        # batch size found ...")` is code; Python prints the error itself unindented)
        in_traceback_code = (
            text[:1].isspace() and key in run.open_tracebacks and not _EXCEPTION_LINE.match(text.lstrip())
        )
        if not in_traceback_code and self.t.oom_hint.search(text):
            form = self._oom_form(text)
            if form is not None:
                self._failure(form, key, rank, host, text)
                return True
        if text[:1].isalpha() and _EXCEPTION_LINE.match(text) is not None:
            self._other_error(key, text)
            return True
        return False

    def _claim_unprefixed(self, run: Run, key: str) -> None:
        """A process's traceback whose first lines lost their prefix (a copy that starts mid-line): the
        unprefixed traceback just before this process's first prefixed line, with no header of its own, is
        this process's."""
        orphan = run.open_tracebacks.get("")
        if (
            orphan is not None
            and not orphan.header
            and run.last_traceback_key == ""
            and run.last_content_was_traceback
        ):
            del run.open_tracebacks[""]
            orphan.key = key
            run.open_tracebacks[key] = orphan
            run.last_traceback_key = key

    def _plain_line(self, run: Run, key: str, text: str) -> None:
        """Any other line: part of the open traceback, else one of the recent lines before a failure."""
        tb = run.open_tracebacks.get(key)
        if _LOG_RECORD.match(text):
            run.last_content_was_traceback = False
            run.recent.pop(key, None)
            return
        if tb is not None:
            if len(tb.lines) < _MAX_TRACEBACK_LINES:
                tb.lines.append(text)
            run.last_content_was_traceback = True
        else:
            recent = run.recent.get(key)
            if recent is None:
                recent = run.recent[key] = deque(maxlen=_RECENT_LINES)
            recent.append(text)
            run.last_content_was_traceback = False

    def _unstamp(self, key: str, text: str) -> str:
        """Take a job platform's timestamp prefix off a line whose rest is traceback text."""
        m = _STAMP_PREFIX.match(text)
        if m is None or m.end() == len(text):
            return text
        rest = text[m.end() :]
        run = self.run
        if match_frame_line(rest) is not None or TRACEBACK_HEADER in rest:
            run.stamped_keys.add(key)
            return rest
        if key in run.stamped_keys and (
            key in run.open_tracebacks or self.t.oom_hint.search(rest) or _EXCEPTION_LINE.match(rest)
        ):
            return rest
        return text

    def _unlogged(self, key: str, text: str) -> str:
        """Take an engine logger's prefix (vLLM's) off a line whose rest is traceback text: a frame, the
        header, a source line of an open traceback, or an error line."""
        m = _ENGINE_LOG_PREFIX.match(text)
        if m is None:
            return text
        rest = text[m.end() :]
        if match_frame_line(rest) is not None or TRACEBACK_HEADER in rest:
            return rest
        if (key in self.run.open_tracebacks and rest[:1].isspace()) or _EXCEPTION_LINE.match(rest):
            return rest
        return text

    def _rich(self, key: str, text: str) -> str | None:
        """A line of a rich traceback box as Python would print it (a frame header or the running source
        line), or None for the box's other lines (borders, numbered context, locals)."""
        stripped = text.strip()
        if _BOX_ONLY.match(stripped):
            return None
        if not stripped.startswith(RICH_BOX):
            return text
        body = stripped[1:-1] if stripped.endswith(RICH_BOX) and len(stripped) > 1 else stripped[1:]
        body = body.replace(RICH_BOX, " ").strip()
        run = self.run
        pending = run.rich_pending.pop(key, None)
        if pending is not None:
            joined = pending + (" " if pending.endswith(" in") else "") + body
            # a path cut anywhere ("…/modules/module." + "py:1818 in state_dict") joins only into a header
            if not _RICH_PATH_PART.match(pending) or _RICH_FRAME.match(joined) or _RICH_HEAD.match(joined):
                body = joined
        m = _RICH_FRAME.match(body)
        if m:
            return f'  File "{m.group("path")}", line {m.group("line")}, in {m.group("func")}'
        if _RICH_HEAD.match(body) or _RICH_PATH_PART.match(body):
            run.rich_pending[key] = body
            return None
        m = _RICH_RUNNING.match(body)
        if m:
            return "    " + m.group("code").strip()
        return None

    def _card(self, text: str) -> None:
        """The card's name where the log prints it (env report, nvidia-smi, device banners)."""
        run = self.run
        text = text[:_CARD_LINE_CHARS]  # a card line is short; the table's lazy patterns stay cheap
        for pattern in self.t.card_patterns:
            m = pattern.search(text)
            if m is None:
                continue
            name = re.sub(r"\s*(?:\.\.\.|…)\s*$", "", m.group("name")).strip()
            if not name:
                continue
            index = m.groupdict().get("index")
            if index is not None:
                card = _int(index)
                if card is not None:
                    run.card_names.setdefault(card, name)
            if run.card_name is None:
                run.card_name = name
            return

    def _bar(
        self, desc: str, n: int | None, total: int | None, shown: str, *, pct: int | None = None
    ) -> None:
        """A progress bar (``n`` None: a bare bar whose count is cut off, of which only ``pct`` is left)."""
        run, snap = self.run, self.run.snap
        loop = (
            self._described_bar(desc, shown, n is not None and total is not None and n < total)
            if desc
            else None
        )
        if loop == "done" or self._owned_bar(desc, total):
            return
        # a bar of the known train total is the train bar; without one, any bar outside an evaluation
        if loop is not None:
            is_train = loop == "train"
        elif run.train_total is not None and total is not None:
            is_train = total == run.train_total
        else:
            is_train = snap.context != "eval"
        if is_train:
            self._train_bar(n, total, shown, pct)
        elif n is not None and total is not None and n < total:
            if snap.context != "eval":
                self._set_context("eval", shown, None)
            if snap.training_started:
                snap.eval_started = True

    def _owned_bar(self, desc: str, total: int | None) -> bool:
        """A bare bar printed after a marker that owns the bars after it (an export merging layer after layer):
        that phase's own progress, unless it counts to the known training total."""
        run = self.run
        if desc or not run.snap.context_owns_bars:
            return False
        return run.train_total is None or total != run.train_total

    def _described_bar(self, desc: str, shown: str, unfinished: bool) -> str | None:
        """A described bar: "train" / "eval" for another trainer's loop, "done" when it is read here (loading
        the model, preparing the dataset) or means nothing."""
        run, snap = self.run, self.run.snap
        loop = self._described_loop(desc)
        if loop == "load":
            if "shard" in desc.lower():
                run.loading_shards = True
            if unfinished or not self._weights_bar(desc):
                self._set_context("load", shown, None)
            else:
                self._loaded(shown, None)  # every shard read: the weights are loaded
            return "done"
        if loop == "other":
            # other described bars are data preparation; before training, an unfinished one of the dataset's
            # own marks the load (once finished, what runs next - the model's loading or training - is not said)
            if not snap.training_started and any(desc.lower().startswith(b) for b in self.t.data_bars):
                self._data_bar(shown, unfinished)
            return "done"
        return loop

    @staticmethod
    def _weights_bar(desc: str) -> bool:
        """A bar over the model's checkpoint files (not a generator's CUDA graphs): once it is full, the weights
        are read."""
        lowered = desc.lower()
        return "shard" in lowered or lowered.startswith(("loading weights", "loading model"))

    def _loaded(self, line: str, why: Text | None) -> None:
        """The model has finished loading (context ``after_load``): what fails next is not the load."""
        self._set_context("after_load", line, why)
        self.run.snap.weights_loaded = True

    def _data_bar(self, shown: str, unfinished: bool) -> None:
        snap = self.run.snap
        if unfinished:
            self._set_context("load", shown, both("log_ctx_dataset"))
        elif snap.context == "load" and snap.context_why == both("log_ctx_dataset"):
            snap.context = snap.context_line = snap.context_why = None  # the preparation it marked is over

    def _train_bar(self, n: int | None, total: int | None, shown: str, pct: int | None) -> None:
        run, snap = self.run, self.run.snap
        if run.train_total is None:
            run.train_total = total  # None: a step line that states no total
        if n is not None:
            snap.train_steps, snap.train_pct = n, None
        elif snap.train_steps is None:
            snap.train_pct = pct
        snap.train_bar = shown
        snap.training_started = True
        snap.weights_loaded = True
        # a finished bar redrawn after the end-of-training summary does not start training again
        finished = (n is not None and total is not None and n >= total) or (pct or 0) >= 100
        if snap.context != "train" and not (snap.context == "after_train" and finished):
            self._set_context("train", shown, None)
        self._bar_after_failure(snap)

    def _bar_after_failure(self, snap: Snapshot) -> None:
        """The first training bar printed after the error line (a terminal redraws the bar as the process
        exits) shows where training stood when it failed: it fills the failure's snapshot where that shows no
        progress and no other phase."""
        failure = self.run.failure
        if failure is None or failure.cut or failure.mention or failure.later_bar_seen:
            return
        failure.later_bar_seen = True
        fs = failure.snapshot
        if fs.context not in (None, "train") or fs.train_steps is not None or fs.train_pct is not None:
            return
        if fs.loss_dicts:
            return
        fs.train_steps, fs.train_pct, fs.train_bar = snap.train_steps, snap.train_pct, snap.train_bar
        fs.training_started = fs.weights_loaded = fs.bar_after_failure = True
        if fs.context is None:
            fs.context, fs.context_line, fs.context_why = "train", snap.train_bar, None

    def _bar_tail(self, text: str) -> None:
        """A bar's timing tail without its count: the loop had run for a while. Outside an evaluation, and
        when no counted bar was seen, the iterations it implies (at least one) are the training steps done."""
        m = _BAR_TAIL.search(text)
        snap = self.run.snap
        if m is None or snap.context in ("eval", "load") or snap.context_owns_bars:
            return
        count = _BARE_COUNT.search(text, 0, m.start() + 1)
        if count is not None and count.end() == m.start() + 1:
            # the bar lost its "%|...|" part but kept its count: "307/46384 [40:22<104:17:25,  8.15s/it]"
            n, total = _int(count.group("n")), _int(count.group("total"))
            if n is not None and total is not None and n <= total:
                self._bar("", n, total, text.strip()[:200])
            return
        if snap.train_steps is not None:
            return
        elapsed_s = 0
        for part in m.group("elapsed").split(":"):
            value = _int(part)
            if value is None:
                return
            elapsed_s = elapsed_s * 60 + value
        rate = float(m.group("rate"))
        if not 1e-9 < rate < 1e12:
            return
        done = int(elapsed_s / rate) if m.group("unit") == "s/it" else int(elapsed_s * rate)
        if done < 1:
            return
        snap.train_steps = done
        snap.train_bar = m.group(0)
        snap.train_steps_estimated = True
        snap.training_started = True
        snap.weights_loaded = True

    def _dict_line(self, text: str) -> bool:
        """A Trainer metrics dict; True when it was one."""
        run, snap = self.run, self.run.snap
        values: dict[str, float] = {}
        for m in _DICT_VALUE.finditer(text):
            try:
                values[m.group(1)] = float(m.group(2))
            except ValueError:
                continue
        if not values:
            return False
        if "loss" in values:
            run.last_loss = values["loss"]
            snap.loss_dicts += 1
            snap.training_started = True
            snap.weights_loaded = True
            self._set_context("train", text.strip(), None)
        if "eval_loss" in values:
            run.eval_loss = values["eval_loss"]
            if snap.training_started:
                self._set_context("train", text.strip(), None)
        if "train_runtime" in values:
            run.train_runtime_s = values["train_runtime"]
            self._set_context("after_train", text.strip(), None)
        elif "step" in text and self.t.step_counter_any is not None and self.t.step_counter_any.search(text):
            self._step_counter(text)  # ms-swift's dicts carry 'global_step/max_steps': '10/100'
        return True

    def _set_context(self, context: str, line: str, why: Text | None) -> None:
        snap = self.run.snap
        snap.context = context
        snap.context_line = line[:200]
        snap.context_why = why
        snap.context_warned = False
        snap.context_in_step = False
        snap.context_owns_bars = False

    def _markers(self, text: str) -> None:
        t = self.t
        if t.card_hint.search(text):
            self._card(text)
        if "ZeRO stage" in text or "zero_optimization_stage" in text:
            self._zero_stage(text)
        if self._marker_line(text):
            self._context_marker(text)
        elif t.run_start.search(text):
            self._restart_if_failed()
        if _BANNER_HINT.search(text):
            self._banner(text)
        if t.allocator_any.search(text):
            self._allocator_warning(text)
        if self._step_line(text):
            self._step_counter(text)
        if any(h in text for h in RUN_REPORT_GATE):
            self._run_reports(text)

    def _run_reports(self, text: str) -> None:
        from oomdoctor.facts import log_data_parallel, log_host_report  # rare lines: off a plain log's path

        if log_host_report.HINT in text:
            self._host_ram_report(text)
        if any(h in text for h in log_data_parallel.HINTS):
            self._data_parallel(text)

    def _data_parallel(self, text: str) -> None:
        from oomdoctor.facts import log_data_parallel

        line = log_data_parallel.data_parallel_line(text)
        if line is not None:
            run = self.run
            run.data_parallel = True
            by_batch = log_data_parallel.gpus_from_batch(line.batch, run.instantaneous_batch_size)
            run.data_parallel_gpus = line.gpus or by_batch or run.data_parallel_gpus

    def _host_ram_report(self, text: str) -> None:
        from oomdoctor.facts import log_host_report

        report = log_host_report.host_ram_report(text)
        if report is not None:
            self.run.host_ram_percent, self.run.host_ram_used_gib = report.percent, report.used_gib

    def _step_line(self, text: str) -> bool:
        """A trainer's step line (the tables' ``step_counters``), tried only on a line holding a hint."""
        t = self.t
        if t.step_counter_any is None or t.step_counter_hints is None:
            return t.step_counter_any is not None and t.step_counter_any.search(text) is not None
        if not t.step_counter_hints.search(text):
            return False
        return any(pattern.search(text) for pattern in self._hinted_step_counters(text))

    def _hinted_step_counters(self, text: str) -> list[re.Pattern[str]]:
        """The step lines worth trying on this line, in the tables' order: those with a hint in it (or none:
        tried anywhere). One never tried is never compiled."""
        t = self.t
        hints = t.step_counter_entry_hints or ((),) * len(t.step_counters)
        return [
            p for p, own in zip(t.step_counters, hints, strict=True) if not own or any(h in text for h in own)
        ]

    def _step_counter(self, text: str) -> None:
        """A trainer's own step line ("Epoch:[1/1](2/19994)", "Step [120/1563]"): read like the train bar,
        outside an evaluation."""
        if self.run.snap.context == "eval":
            return
        for pattern in self._hinted_step_counters(text):
            m = pattern.search(text)
            if m is None:
                continue
            groups = m.groupdict()
            n = _steps_done(groups)
            total = _int(groups["total"]) if groups.get("total") is not None else None
            if n is not None and (total is None or n <= total):
                self._bar("train", n, total, text.strip()[:200])  # "train": a described train loop's bar
            return

    def _zero_stage(self, text: str) -> None:
        for pattern in self.t.zero_stage_lines:
            m = pattern.search(text)
            if m:
                self.run.zero_stage = int(m.group("stage"))
                return

    def _marker_line(self, text: str) -> bool:
        """A marker matches the line. A marker with hints is tried only on a line holding one of them (one
        search for all the hints: most lines hold none), the others in one combined search."""
        t = self.t
        if t.marker_any is not None and t.marker_any.search(text):
            return True
        if t.marker_hints is None or not t.marker_hints.search(text):
            return False
        return any(m.hints and m.may_match(text) and m.pattern.search(text) for m in t.markers)

    def _context_marker(self, text: str) -> None:
        """Setup markers mark the run; the first other marker sets the phase context (a run start after a
        failure starts a new run first)."""
        run, snap = self.run, self.run.snap
        t = self.t
        for marker in t.markers:
            if not marker.may_match(text) or not marker.pattern.search(text):
                continue
            if marker.after is not None and snap.context != marker.after:
                continue
            if marker.sharding == "fsdp":
                run.fsdp_seen = True
            if marker.launch:
                run.launched = True
                continue
            if marker.resume:
                run.resumed = True
                continue
            if marker.export:
                snap.export = True
            if marker.context is None and not marker.setup:
                continue  # it only shows what shards the run
            if marker.setup:
                run.setup_seen = True
                run.setup_line = run.setup_line or text.strip()[:200]
                run.setup_why = marker.why
                continue
            if marker.context == "train" and t.run_start.search(text) and self._restart_if_failed():
                run, snap = self.run, self.run.snap
            if marker.context == "train":
                snap.training_started = True
                snap.weights_loaded = True
                if t.run_start.search(text):
                    run.num_examples = None  # the next "Num examples" is the training set's
            elif marker.context == "eval" and snap.training_started:
                snap.eval_started = True
            if marker.context == "after_load":
                self._loaded(text.strip(), marker.why)
                return
            self._set_context(str(marker.context), text.strip(), marker.why)
            snap.context_warned, snap.context_in_step = marker.warns, marker.in_step
            snap.context_owns_bars = marker.owns_bars
            return

    def _allocator_warning(self, text: str) -> None:
        run = self.run
        for w in self.t.allocator_warnings:
            m = w.pattern.search(text)
            if m:
                count = (_int(m.group("n")) or 0) if "n" in w.pattern.groupindex else 0
                if w.count == "add":
                    run.alloc_retries += count
                elif w.count == "max":
                    run.alloc_retries_max = max(run.alloc_retries_max, count)
                self._warn(text)
                return

    def _banner(self, text: str) -> None:
        run, snap = self.run, self.run.snap
        for name, rx in _BANNER.items():
            m = rx.search(text)
            if m:
                setattr(run, name, _int(m.group(1)))
                if name == "total_steps":
                    run.train_total = run.total_steps
                return
        m = _NUM_EXAMPLES.search(text)
        if m:
            if snap.context == "train" and run.num_examples is None:
                run.num_examples = _int(m.group(1))
            return
        m = _LF_PARAMS.search(text)
        if m:
            run.trainable_params = _int(m.group(1))
            run.all_params = _int(m.group(2))
            snap.weights_loaded = True
            return
        m = _PROCESS_RANK.search(text)
        if m:
            run.world_size = _int(m.group(2))
            return
        if "Gradient checkpointing enabled" in text:
            run.gradient_checkpointing_logged = True
            return
        m = _ALL_PARAMS.search(text)
        if m and run.all_params is None:
            run.all_params = _int(m.group(1))

    def _warn(self, text: str) -> None:
        run = self.run
        line = text.strip()[:240]
        if line not in run.warnings and len(run.warnings) < _MAX_WARNINGS:
            run.warnings.append(line)

    # ------------------------------------------------------------------ tracebacks and failures
    def _open_traceback(self, key: str, *, header: bool) -> _Traceback:
        run = self.run
        old = run.open_tracebacks.get(key)
        if header or old is None:
            # a chained traceback ("During handling of ...") starts a fresh block; keep the first if it
            # already reached a failure (that one is recorded on the Failure itself)
            if old is not None and old.has_frames:
                run.unfinished[key] = (
                    old  # replaced before its error line (a launcher's own traceback may follow)
                )
            run.tracebacks_opened += 1
            tb = _Traceback(
                lines=[], snapshot=replace(run.snap), header=header, seq=run.tracebacks_opened, key=key
            )
            run.open_tracebacks[key] = tb
        else:
            tb = old
        run.last_traceback_key = key
        run.recent.pop(key, None)
        return tb

    def _oom_form(self, text: str) -> OomForm | None:
        for form in self.t.oom_forms:
            if any(h in text for h in form.hints) and form.pattern.search(text):
                return form
        return None

    def _failure(self, form: OomForm, key: str, rank: int | None, host: str | None, text: str) -> None:
        run = self.run
        run.last_content_was_traceback = False
        if form.only_without_error and (run.errors_seen or self._launcher_teardown(text)):
            self._warn(text)
            return
        current = run.failure
        mention = _is_mention(form, text)
        if current is not None and current.mention and not mention and form.ran_out_of == current.ran_out_of:
            current = None  # the reporter's words came first; this is the message itself
        if current is not None and form.priority <= current.priority:
            if form.kind == "killed":
                self._warn(text)
            tb = run.open_tracebacks.pop(key, None)
            if tb is not None:
                # another process's traceback that ended in the same kind of failure ran the same code
                sibling = key != current.key and form.ran_out_of == current.ran_out_of and not current.cut
                _adopt(current, tb, sibling=sibling)
            return
        tb = run.open_tracebacks.pop(key, None)
        if tb is not None:
            block, snap = tb.lines, tb.snapshot
        else:
            block, snap = list(run.recent.get(key, ())), replace(run.snap)
        run.recent.pop(key, None)
        run.failure = Failure(
            kind=form.kind,
            ran_out_of=form.ran_out_of,
            priority=form.priority,
            line=first_message(text.strip())[:400],
            message=text,
            key=key,
            rank=rank,
            host=host,
            block=block,
            snapshot=snap,
            pending_lines=3 if form.kind == "cuda_oom" and "capac" not in text else 0,
            after_seq=run.tracebacks_opened,
            mention=mention,
        )
        if current is not None and current.kind == "killed" and current.line:
            self._warn(current.line)

    def _other_error(self, key: str, text: str) -> None:
        run = self.run
        run.errors_seen += 1
        tb = run.open_tracebacks.pop(key, None)
        run.last_content_was_traceback = False
        if self._child_cut(key, tb, text):
            return
        if run.other_error is None or not _launcher_report(text):
            run.other_error = text.strip()[:400]  # a launcher's report keeps the child's own error

    def _child_cut(self, key: str, tb: _Traceback | None, text: str) -> bool:
        """A launcher's report that a child failed, after the child's traceback was cut before its error line
        (facts/log_child.py): that traceback becomes the failure, cut. True when it did."""
        from oomdoctor.facts import log_child

        run = self.run
        if not _launcher_report(text):
            return False
        if run.failure is not None:
            # a traceback printed after the error line, ended by the launcher's report: the child's part of it
            # is where the failure's process was (adopted when the failure's own block holds no frame)
            child = log_child.child_lines(tb.lines) if tb is not None else []
            if tb is not None and child:
                _adopt(run.failure, replace(tb, lines=child))
            return False
        for source in (tb, run.unfinished.get(key)):
            block = log_child.child_lines(source.lines) if source is not None else []
            if source is not None and block:
                run.failure = _cut_failure(key, block, source.snapshot)
                return True
        return False

    def _launcher_teardown(self, text: str) -> bool:
        """A launcher's line that it tears the run down (DeepSpeed's sigkill_handler, "Killing subprocess"): with
        a traceback open before it (cut by the excerpt) that traceback is the failure, cut; a child that exited
        with a positive code raised an exception the log does not show (a kill is -9 / 137): the run was under
        way and stopped with no error line (asked). True when the line is no kill."""
        from oomdoctor.facts import log_child

        run = self.run
        key = run.last_traceback_key
        tb = run.open_tracebacks.get(key) if key is not None else None
        if run.failure is None and tb is not None and tb.has_frames:
            block = log_child.child_lines(tb.lines) or tb.lines
            run.failure = _cut_failure(key or "", block, tb.snapshot)
            return True
        code = _RETURN_CODE.search(text)
        if code is None or int(code.group(1)) <= 0 or int(code.group(1)) in _KILL_CODES:
            return False
        run.launched = True  # the launcher's own line: the run was under way, and how it failed is not shown
        return True

    def _close_cut_traceback(self, run: Run) -> None:
        """A log that ends inside a traceback (an excerpt cut before its error line): record where it was."""
        if run.failure is not None or not run.last_content_was_traceback:
            return
        key = run.last_traceback_key
        tb = run.open_tracebacks.get(key) if key is not None else None
        # an excerpt may end right after the header, before any frame: still a traceback that was cut
        if tb is None or not (tb.has_frames or tb.header):
            return
        # IPython named the class on the header line: an OOM said at the top, cut before the bottom
        form = self._oom_form(tb.names) if tb.names else None
        run.failure = _cut_failure(key or "", tb.lines, tb.snapshot)
        if form is not None:
            run.failure.kind, run.failure.ran_out_of, run.failure.priority = (
                form.kind,
                form.ran_out_of,
                form.priority,
            )
            run.failure.message, run.failure.cut = tb.names.strip(), False

    def _restart_if_failed(self) -> bool:
        """A new run starts in the same file: keep the failed one, start over (a reporter's sentence naming
        the OOM is no failed run: the log pasted after it is the run it speaks of)."""
        if self.run.failure is None or self.run.failure.mention:
            return False
        self.last_failed = self.run
        self.run = Run()
        self.runs_seen += 1
        return True


def _cut_failure(key: str, block: list[str], snapshot: Snapshot) -> Failure:
    """A traceback of process ``key`` that stops before its error line, as the run's failure (cut)."""
    failure = Failure(
        kind=None,
        ran_out_of=None,
        priority=-1,
        line=None,
        message="",
        key=key,
        rank=None,
        host=None,
        block=block,
        snapshot=snapshot,
        cut=True,
    )
    if key.startswith("rank") and key[4:].isdecimal():
        failure.rank = int(key[4:])
    elif key.startswith("host:"):
        failure.host = key[5:]
    return failure


# a launcher's report of a child's exit code ("exits with return code = 1"); -9 and 137 are SIGKILL
_RETURN_CODE = lazy(r"return code\s*=\s*(-?\d{1,4})\b")
_KILL_CODES = frozenset({137})


def _launcher_report(text: str) -> bool:
    """The error line is a launcher saying one of its children failed (facts/log_child.py)."""
    if "Error" not in text:
        return False
    from oomdoctor.facts import log_child

    return log_child.is_child_failure(text.strip())


def _steps_done(groups: dict[str, str | None]) -> int | None:
    """The optimizer steps a step line says are done: group ``n`` counts them, ``n0`` is the zero-based index
    of the step just done (nanoGPT's "iter 0: loss ..." follows the first step)."""
    if groups.get("n") is not None:
        return _int(str(groups["n"]))
    index = _int(str(groups["n0"])) if groups.get("n0") is not None else None
    return None if index is None else index + 1


def _is_mention(form: OomForm, text: str) -> bool:
    """A GPU OOM's words inside a sentence ("I met the `CUDA out of memory` problem", "CI often fails with
    torch.OutOfMemoryError: CUDA out of memory: https://..."): three or more words before them, none of them
    an error line's (FAILED, ERROR, an exception name), and no numbers. It counts as the failure only until
    the message itself or its traceback comes."""
    if form.ran_out_of != "gpu" or "Tried to allocate" in text or "total capac" in text:
        return False
    m = _OOM_WORDS.search(text)
    if m is None:
        return False
    before = text[: m.start()]
    words = _WORD.findall(before)
    if any(w in _ERROR_WORDS or w.endswith(("Error", "Exception")) for w in words):
        return False
    # a Chinese sentence counts by its characters: "训练到一半报 CUDA out of memory"
    return len(words) >= 3 or len(_CJK.findall(before)) >= 2


_OOM_WORDS = lazy(r"(?:[\w.]*\.)?OutOfMemoryError|(?:CUDA|HIP|NPU|XPU) (?:[Ee]rror: )?out of memory")
_WORD = lazy(r"[A-Za-z]+")
_CJK = lazy(r"[\u4e00-\u9fff]")
_ERROR_WORDS = frozenset({"FAILED", "ERROR", "E", "CRITICAL", "WARNING", "WARN", "Traceback", "raise"})


def _has_frame_lines(block: list[str]) -> bool:
    return any(match_frame_line(line) is not None for line in block)


def _lend_sibling(failure: Failure, open_tracebacks: Iterable[_Traceback]) -> None:
    """The first traceback of another rank still open when the log ends (it never reached an error line, nor
    another exception: the excerpt or the log stops first) tells where that rank was; ranks of one run run
    the same code, so it is kept with a rank's failure for when its own frames tell nothing."""
    if failure.cut or not failure.key.startswith("rank"):
        return
    others = [
        tb for tb in open_tracebacks if tb.has_frames and tb.key.startswith("rank") and tb.key != failure.key
    ]
    if others:
        first = min(others, key=lambda tb: tb.seq)
        failure.sibling_block, failure.sibling_key = list(first.lines), first.key


def _adopt(failure: Failure, tb: _Traceback, *, sibling: bool = False) -> bool:
    """Some errors print before their traceback (NCCL's "WARN Cuda failure 'out of memory'", a second rank's
    message interleaved ahead of its frames, or a reporter who pasted the error first). A failure whose
    own block holds no frame takes the first traceback with frames that opened after it, from the same
    process (or any process when the error line carried no prefix). ``sibling``: the traceback of another
    process that failed the same way (data-parallel ranks run the same code), whenever it was printed.
    True when it adopted one."""
    if failure.adopted or failure.cut or not tb.has_frames:
        return False
    if not sibling and (tb.seq <= failure.after_seq or (tb.key != failure.key and failure.key != "")):
        return False
    if _has_frame_lines(failure.block):
        return False
    failure.block = tb.lines + failure.block
    failure.adopted = True
    failure.adopted_from = tb.key if sibling else None
    if failure.mention:
        # the run's state when its traceback began, not when the reporter talked about it
        failure.snapshot = tb.snapshot
    return True
