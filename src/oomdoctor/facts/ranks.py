"""Multi-rank runs: which process failed first, and whether the others ran out too or were torn down.

A log of several ranks or nodes (one file with "[rankN]:" / "host:" prefixes, or a folder of per-node logs
given as ``--log DIR``) holds one failure and its echoes: the launcher stops the siblings (ChildFailedError,
SIGTERM, NCCL aborting), and on a run short of memory everywhere, the others print the same OOM. The
first rank that failed is the one to diagnose; the rest says whether the cause is shared.

Pure text in, a ``RankReport`` out; ``read_log_dir`` reads a folder of per-node logs into one text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.facts.log_tables import markers_raw, tables
from oomdoctor.facts.log_text import split_lines, split_prefix
from oomdoctor.lazyre import lazy
from oomdoctor.records import record

if TYPE_CHECKING:
    from oomdoctor.facts.types import LogFacts

LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
MAX_FILE_BYTES = 64 * 1024**2  # the tail of a bigger node log is read (the failure is at the end)


@record(frozen=True)
class RankReport:
    """Which process of a multi-rank log failed first, and how the others ended."""

    processes: tuple[str, ...]  # every process label seen ("rank3", "node1/rank0", "host:worker-2")
    first: str | None  # the first process whose memory ran out
    first_line: int | None  # its line number in the text read
    oomed: tuple[str, ...]  # every process that printed an out-of-memory, the first included
    torn_down: tuple[str, ...]  # processes stopped after the failure without an OOM of their own
    root_cause_rank: int | None = None  # torchrun's "Root Cause (first observed failure)" rank

    @property
    def same_cause(self) -> bool:
        return len(self.oomed) > 1


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    raw = markers_raw()
    teardown = lazy("|".join(f"(?:{p})" for p in raw["teardown_lines"]))
    return teardown, lazy(raw["root_cause_header"]), lazy(raw["root_cause_rank"])


def _is_oom(text: str) -> bool:
    t = tables()
    if not t.oom_hint.search(text):
        return False
    return any(
        any(h in text for h in f.hints) and f.pattern.search(text) for f in t.oom_forms if f.priority >= 2
    )


def _label(key: str) -> str:
    return key[5:] if key.startswith("host:") else key


# Above this size a text is not read line by line: only the lines the report acts on (an OOM hint, a teardown,
# the launcher's root-cause block) and the last lines, where every process's traceback ends, are.
WHOLE_TEXT_CHARS = 1024**2
LAST_LINES = 4000
LAST_CHARS = 512 * 1024
ROOT_BLOCK_LINES = 12


def _lines_that_matter(
    text: str | bytes, teardown: re.Pattern[str], root_header: re.Pattern[str]
) -> list[tuple[int, str]]:
    """(order key, line) of the lines ``rank_report`` reads, in order: all of a small text; of a big one (read
    as bytes: nothing but these lines is decoded), each line an OOM hint, a teardown or a root-cause header
    falls on (with the lines after a header, which name the rank), and the last ``LAST_LINES`` lines. The key is
    the line number, or for a big text the line's offset: only the order matters."""
    if len(text) <= WHOLE_TEXT_CHARS:
        whole = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
        return list(enumerate(split_lines(whole), 1))
    raw = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    tail_start = len(raw)
    for _ in range(LAST_LINES):
        tail_start = raw.rfind(b"\n", 0, tail_start)
        if tail_start < 0:
            break
    if len(raw) - (tail_start + 1) > LAST_CHARS:  # start at a line boundary within the last LAST_CHARS
        tail_start = raw.find(b"\n", len(raw) - LAST_CHARS)
    tail_start += 1
    lines = split_lines(_decoded(raw[tail_start:]))[-LAST_LINES:]  # progress-bar redraws are lines too
    tail = [(tail_start + i, line) for i, line in enumerate(lines)]
    if len({key for _, line in tail if (key := split_prefix(line).key)}) < 2:
        return tail  # every process's traceback ends in the last lines: fewer than two there, no report
    starts: set[int] = set()
    for m in _hint_pattern(teardown, root_header).finditer(raw, 0, tail_start):
        start = raw.rfind(b"\n", 0, m.start()) + 1
        starts.add(start)
        end = raw.find(b"\n", m.start())
        if end >= 0 and root_header.search(_decoded(raw[start:end])):
            for _ in range(ROOT_BLOCK_LINES):  # the block's "rank : N" line comes a few lines below
                starts.add(end + 1)
                end = raw.find(b"\n", end + 1)
                if end < 0:
                    break
    picked: list[tuple[int, str]] = []
    for start in sorted(starts):
        end = raw.find(b"\n", start)
        line = _decoded(raw[start : end if end >= 0 else len(raw)])
        picked += [(start, part) for part in split_lines(line)]
    return picked + tail


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@lru_cache(maxsize=1)
def _hint_pattern(teardown: re.Pattern[str], root_header: re.Pattern[str]) -> Any:
    """One search over bytes for the lines a rank report acts on: RE2's DFA where google-re2 is installed (a
    literal alternation over megabytes is many times faster there), else ``re``."""
    source = "|".join(f"(?:{p.pattern})" for p in (tables().oom_hint, teardown, root_header)).encode()
    try:
        import re2

        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1  # bytes: a log may hold any byte
        return re2.compile(source, options)
    except Exception:  # not installed, or a pattern RE2 does not take (backreferences): re reads it
        return re.compile(source)


def rank_report(text: str | bytes) -> RankReport | None:
    """Who failed first and how the others ended; None when the text shows fewer than two processes."""
    teardown, root_header, root_rank = _patterns()
    seen: dict[str, None] = {}
    oomed: dict[str, int] = {}
    torn: dict[str, None] = {}
    root: int | None = None
    in_root = False
    launcher_stopped = False  # the launcher's own lines (no process prefix) say it stopped the others
    for number, line in _lines_that_matter(text, teardown, root_header):
        p = split_prefix(line)
        if p.key:
            seen.setdefault(p.key)
        if root_header.search(p.text):
            in_root = True
            continue
        if in_root:
            m = root_rank.match(p.text)
            if m:
                root, in_root = int(m.group("rank")), False
            continue
        if not p.key:
            launcher_stopped = launcher_stopped or bool(teardown.search(p.text))
            continue
        if p.key not in oomed and _is_oom(p.text):
            oomed[p.key] = number
        elif teardown.search(p.text):  # in any order: per-node files are read one after the other
            torn.setdefault(p.key)
    if len(seen) < 2:
        return None
    first = min(oomed, key=oomed.__getitem__) if oomed else None
    return RankReport(
        processes=tuple(_label(k) for k in seen),
        first=_label(first) if first else None,
        first_line=oomed.get(first) if first else None,
        oomed=tuple(_label(k) for k in sorted(oomed, key=oomed.__getitem__)),
        torn_down=tuple(
            _label(k)
            for k in seen
            if k not in oomed and (k in torn or (launcher_stopped and first is not None))
        ),
        root_cause_rank=root,
    )


def _prefix_for(path: Path, index: int) -> str:
    """A line prefix the reader groups by: the file's stem when it names a host (has a digit)."""
    stem = re.sub(r"[^\w.-]", "-", path.stem) or "node"
    return f"{stem}: " if re.search(r"\d", stem) else f"node{index}-{stem}: "


def per_node_logs(folder: Path) -> list[Path]:
    """The text logs in a folder, one per node or rank (sorted by name); empty when there are none."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in LOG_SUFFIXES)


def read_log_dir(folder: Path) -> str:
    """The per-node logs of a folder as one text, each line behind its node's prefix."""
    parts: list[str] = []
    for index, path in enumerate(per_node_logs(folder)):
        with open(path, "rb") as fh:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                fh.seek(size - MAX_FILE_BYTES)
            data = fh.read()
        text = data.decode("utf-8", errors="replace")
        prefix = _prefix_for(path, index)
        parts.append("\n".join(prefix + line for line in text.splitlines()))
    return "\n".join(parts) + "\n"


def rank_findings(report: RankReport | None) -> list[tuple[str, dict[str, object]]]:
    """(finding id, fields) for the diagnosis: who failed first, and what became of the others."""
    if report is None or report.first is None:
        return []
    out: list[tuple[str, dict[str, object]]] = [
        ("ranks_first", {"first": report.first, "n": len(report.processes)})
    ]
    others = [p for p in report.oomed if p != report.first]
    if others:
        out.append(("ranks_same_cause", {"others": ", ".join(others)}))
    if report.torn_down:
        out.append(("ranks_torn_down", {"others": ", ".join(report.torn_down)}))
    if report.root_cause_rank is not None and f"rank{report.root_cause_rank}" not in report.first:
        out.append(("ranks_root_cause", {"rank": report.root_cause_rank}))
    return out


RANK_SCAN_BYTES = 16 * 1024**2  # the part of a single log file read for the rank report (its end)


def _is_output_dir(folder: Path) -> bool:
    t = tables()
    return any((folder / name).is_file() for name in (*t.output_dir_logs, t.trainer_log))


def _tail_text(path: Path) -> bytes:
    """The end of the log, as bytes (``rank_report`` decodes only the lines it reads)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if size > RANK_SCAN_BYTES:
            fh.seek(size - RANK_SCAN_BYTES)
        return fh.read()


def read_run_log(path: Path) -> LogFacts:
    """The log reader for ``--log``: a LLaMA-Factory output_dir or a file as ``read_log`` reads them (a small
    file with wrapped or glued lines as its text put back together, ``read_log_reassembling``), or a folder of
    per-node logs as one multi-node log; with the rank report of a multi-rank log."""
    from oomdoctor.facts.log import parse_log_text, read_log_reassembling

    if path.is_dir() and not _is_output_dir(path) and per_node_logs(path):
        return parse_log_text(read_log_dir(path), path=str(path))
    facts, reassembled = read_log_reassembling(path, REASSEMBLE_MAX_BYTES)
    if not reassembled and facts.ranks is None and path.is_file():
        facts.ranks = rank_report(_tail_text(path))
    return facts


REASSEMBLE_MAX_BYTES = 8 * 1024**2  # a pasted or saved excerpt; big logs keep the windowed reader
