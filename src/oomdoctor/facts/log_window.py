"""Read a log region the way grep does: search the bytes, decode and scan only the windows that matter.

A big log is nearly all progress bars, loss dicts and plain per-step lines. One bytes-level search
(``log_needles.hit_pattern``) finds the lines the scanner acts on (failures, tracebacks, markers, banners,
warnings); each hit is read in detail with the segments around it, and so is the end of the region. The
stretches between windows ("gaps") are not decoded: they are summed up with C-speed byte counts into what
the scanner would have kept from them (their first and last progress bar, their last loss dict and the
number of loss dicts), the same reduction ``LogScanner.feed_text`` applies to a run of progress lines. A gap
that does not reduce that way (bars of mixed totals, an evaluation interleaved with loss dicts, the lines
a failure still waits for) is read in detail, a chunk at a time.

What a gap's plain lines would have added is not kept: they change only the few lines of context kept
before a failure, and the window before every hit holds those.
"""

from __future__ import annotations

from typing import Any, Literal

from oomdoctor.facts.log_needles import hit_pattern, step_counter_literals
from oomdoctor.facts.log_scan import CLIP, MAX_LINE_CHARS, LogScanner
from oomdoctor.facts.log_text import decode_block
from oomdoctor.lazyre import lazy
from oomdoctor.records import record

_LOSS = b"'loss':"
_BAR = b"%|"
_STEP_LINE_TRIES = (
    64  # lines holding a step line's literal looked at from a gap's end before it is read whole
)
_NONSPACE = lazy(rb"\S")


@record(frozen=True)
class WindowSizes:
    """How much is read in detail around each hit. Tests shrink these to exercise the gaps on small logs."""

    before: int = 32  # segments ("\\r" or "\\n" ended) before a hit
    after: int = 64  # segments after it (a failure's wrapped message, a traceback's source lines)
    margin_bytes: int = 64 * 1024  # a margin never spans more bytes than this
    end: int = 64  # segments at the end of the region
    detail_chunk: int = 256 * 1024  # a gap read in detail is fed in pieces of about this size


DEFAULT_SIZES = WindowSizes()


def available() -> bool:
    """Whether the needles could be derived from the scanner's regexes (else the region is read whole)."""
    return hit_pattern() is not None


def has_text(buf: bytes, lo: int, hi: int) -> bool:
    return _NONSPACE.search(buf, lo, hi) is not None


def scan_region(
    buf: bytes,
    lo: int,
    hi: int,
    scanner: LogScanner,
    encoding: str | None,
    sizes: WindowSizes = DEFAULT_SIZES,
) -> str:
    """Feed ``buf[lo:hi]`` (cut at line ends) to the scanner as windows and gap summaries; returns the encoding."""
    finder = hit_pattern()
    assert finder is not None, "scan_region needs available()"
    windows = _windows(finder, buf, lo, hi, sizes)
    enc = _decide_encoding(buf, windows, encoding)
    reader = _Reader(buf, scanner, enc, sizes)
    at = lo
    for start, end in windows:
        line_start = _line_start(buf, at, start)
        if at < line_start:
            reader.gap(at, line_start)
        reader.feed(start, end, line_start)
        at = end
    if at < hi:
        reader.gap(at, hi)
    return enc


def _line_start(buf: bytes, floor: int, start: int) -> int:
    """Where the segment a window starts in begins (a margin may start inside a very long line)."""
    if start == floor or buf[start - 1 : start] in (b"\n", b"\r"):
        return start
    return max(_break_before(buf, floor, start), floor - 1) + 1


# ---------------------------------------------------------------------------------------------- windows
def _windows(finder: Any, buf: bytes, lo: int, hi: int, sizes: WindowSizes) -> list[tuple[int, int]]:
    """Merged (start, end) byte ranges around every hit, and the region's end; each starts and ends a segment."""
    windows: list[tuple[int, int]] = []
    pos = lo
    while pos < hi:
        m = finder.search(buf, pos, hi)
        if m is not None and windows and m.start() < windows[-1][1]:
            start = windows[-1][0]  # a hit at the window's end: the window goes on
        else:
            _close(buf, windows, hi, sizes)
            if m is None:
                break
            floor = max(lo, windows[-1][1] if windows else lo, m.start() - sizes.margin_bytes)
            start = segment_start(buf, m.start(), floor, sizes.before)
        ceiling = min(hi, m.end() + sizes.margin_bytes)
        _add(windows, start, min(hi, segment_end(buf, m.end(), ceiling, sizes.after)))
        # the hits between this one and the window's end are covered by _close's extra margin
        pos = max(m.end(), windows[-1][1])
    floor = max(lo, hi - sizes.margin_bytes)
    _add(windows, segment_start(buf, hi, floor, sizes.end), hi)
    return windows


def _close(buf: bytes, windows: list[tuple[int, int]], hi: int, sizes: WindowSizes) -> None:
    """Give the last window the margin its last hits had: the search skipped the hits inside it, and the
    latest of them is at most ``after`` segments before its end."""
    if windows:
        start, end = windows[-1]
        ceiling = min(hi, end + sizes.margin_bytes)
        windows[-1] = (start, max(end, min(ceiling, segment_end(buf, end, ceiling, sizes.after - 1))))


def _add(windows: list[tuple[int, int]], start: int, end: int) -> None:
    if windows and start <= windows[-1][1]:
        windows[-1] = (windows[-1][0], max(end, windows[-1][1]))
    else:
        windows.append((start, end))


def segment_start(buf: bytes, pos: int, floor: int, back: int) -> int:
    """Start of the segment ``back`` segments before the one holding ``pos`` (never below ``floor``).
    Each step looks only as far back as the previous line break (a log without "\r" costs no more)."""
    for _ in range(back + 1):
        sep = _break_before(buf, floor, pos)
        if sep < 0:
            return floor
        pos = sep
    return pos + 1


def _break_before(buf: bytes, floor: int, pos: int) -> int:
    nl = buf.rfind(b"\n", floor, pos)
    cr = buf.rfind(b"\r", max(floor, nl + 1), pos)
    return max(nl, cr)


def segment_end(buf: bytes, pos: int, ceiling: int, ahead: int) -> int:
    """End (after its line break) of the ``ahead``-th segment after the one holding ``pos``; at most ``ceiling``.
    Each step looks only as far as the next line break."""
    end = pos
    for _ in range(ahead + 1):
        nl = buf.find(b"\n", end, ceiling)
        cr = buf.find(b"\r", end, nl if nl >= 0 else ceiling)
        sep = cr if cr >= 0 else nl
        if sep < 0:
            return ceiling
        end = sep + 2 if buf[sep : sep + 2] == b"\r\n" else sep + 1
    return end


def _decide_encoding(buf: bytes, windows: list[tuple[int, int]], encoding: str | None) -> str:
    """One encoding for the whole region, decided on the windows' bytes as decode_block decides on a block."""
    if encoding == "utf-8-sig":
        encoding = None
    try:
        for start, end in windows:
            buf[start:end].decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    return decode_block(b"".join(buf[s:e] for s, e in windows), encoding)[1]


# ---------------------------------------------------------------------------------------------- feeding
class _Reader:
    def __init__(self, buf: bytes, scanner: LogScanner, encoding: str, sizes: WindowSizes) -> None:
        self.buf = buf
        self.scanner = scanner
        self.encoding = encoding
        self.sizes = sizes

    def text(self, start: int, end: int) -> str:
        return self.buf[start:end].decode(self.encoding, errors="replace")

    def feed(self, start: int, end: int, line_start: int | None = None) -> None:
        """Feed a window. One that starts inside a long line gets that line's beginning in front, as the
        scanner clips a long line (its first half, " … ", its end), so a bar's "n%|" is not lost."""
        text = self.text(start, end)
        if line_start is not None and line_start < start:
            half = MAX_LINE_CHARS // 2
            if start - line_start <= 4 * half:
                text = self.text(line_start, start) + text
            else:
                text = self.text(line_start, line_start + 4 * half)[:half] + CLIP + text
        self.scanner.feed_text(text)

    def gap(self, start: int, end: int) -> None:
        """Sum the gap up; what must be read line by line first (see _needs_detail) is read in detail."""
        first = True
        while start < end and self._needs_detail(start, end):
            cut = self._chunk_end(start, end)
            first_bar = self.buf.find(_BAR, start, cut)
            if first and first_bar >= 0:  # read up to the first bar: after it the rest may sum up
                cut = segment_end(self.buf, first_bar, end, 0)
            first = False
            self.feed(start, cut)
            start = cut
        if start < end and not self._summary(start, end):
            while start < end:
                cut = self._chunk_end(start, end)
                self.feed(start, cut)
                start = cut

    def _chunk_end(self, start: int, end: int) -> int:
        """A segment end about one chunk on (a line longer than two chunks is cut inside)."""
        chunk = self.sizes.detail_chunk
        return segment_end(self.buf, min(end, start + chunk), min(end, start + 2 * chunk), 0)

    def _needs_detail(self, start: int, end: int) -> bool:
        run = self.scanner.run
        if run.failure is not None and run.failure.pending_lines:
            return True  # the failure's message may continue on the next lines
        snap = run.snap
        if snap.train_steps is None and snap.context not in ("eval", "load"):
            # a bar's timing tail without its count is read as steps done until a counted bar is seen
            return self.buf.find(b"s/it", start, end) >= 0 or self.buf.find(b"it/s", start, end) >= 0
        return False

    def _segment(self, pos: int, start: int, end: int) -> tuple[int, str]:
        buf = self.buf
        s = max(buf.rfind(b"\n", start, pos), buf.rfind(b"\r", start, pos)) + 1
        s = max(s, start)
        ends = [e for e in (buf.find(b"\n", pos, end), buf.find(b"\r", pos, end)) if e >= 0]
        return s, self.text(s, min(ends) if ends else end)

    def _summary(self, start: int, end: int) -> bool:
        """Feed what the gap's progress lines leave behind; False when the gap does not reduce to that."""
        buf, scanner = self.buf, self.scanner
        bars = buf.count(_BAR, start, end)
        dicts = buf.count(_LOSS, start, end)
        kept: dict[int, str] = {}
        if bars:
            first = self._segment(buf.find(_BAR, start, end), start, end)
            last = self._segment(buf.rfind(_BAR, start, end), start, end)
            a, b = scanner.read_bar(first[1]), scanner.read_bar(last[1])
            if a is None or b is None or a[0] != b[0] or a[2] != b[2]:
                return False  # not one bar counting to one total
            desc, n, total = a
            if buf.count(b"/%d [" % total, start, end) != bars:
                return False  # some bar has another total (or another format)
            loop = scanner.bar_loop(desc, total)
            if loop == "eval" and (dicts or n >= total):
                return False  # loss dicts between evaluation bars change the context back and forth
            kept[first[0]] = first[1]
            kept[last[0]] = last[1]
        if dicts:
            at, line = self._segment(buf.rfind(_LOSS, start, end), start, end)
            kept[at] = line
        last_step_line = self._last_step_line(start, end)
        if last_step_line is False:
            return False  # too many lines hold a step line's literal without being one: read it in detail
        if last_step_line is not None:
            kept[last_step_line[0]] = last_step_line[1]
        for _, line in sorted(kept.items()):
            scanner.feed_text(line)
        if dicts > 1:
            scanner.run.snap.loss_dicts += dicts - 1
        return True

    def _last_step_line(self, start: int, end: int) -> tuple[int, str] | None | Literal[False]:
        """The gap's last step line (a line holding a literal of ``step_counter_literals`` that the tables' step
        lines match), which the scanner reads for the steps done (a later one overrides an earlier one); None
        when the gap has none, False when too many lines hold a literal without being one."""
        literals = step_counter_literals() or ()
        matcher = self.scanner.t.step_counter_any
        if not literals or matcher is None:
            return None
        hi = end
        for _ in range(_STEP_LINE_TRIES):
            at = max((self.buf.rfind(lit, start, hi) for lit in literals), default=-1)
            if at < 0:
                return None
            seg_start, line = self._segment(at, start, end)
            if matcher.search(line):
                return seg_start, line
            hi = seg_start
            if hi <= start:
                return None
        return False
