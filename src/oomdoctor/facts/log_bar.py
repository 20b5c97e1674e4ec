"""tqdm progress bars in a line, found in linear time.

"{desc}: 17%|█▏   | 1000/6060 [6:44:48<34:21:44, 24.45s/it]" (desc optional; the bar may be ASCII). The
one-regex form of this, ``(?P<desc>[^|\\r\\n]*?)\\s*(?P<pct>\\d{1,3})%\\|[^|\\n]*\\|\\s*(?P<n>\\d+)/(?P<total>\\d+)...``,
gives the same matches but backtracks: a 20,000-character bar line took it 16 s. Here each "%|" is found with
``str.find``, the description is read backwards from it and the count forwards, so every character is
looked at a bounded number of times.
"""

from __future__ import annotations

from oomdoctor.lazyre import lazy
from oomdoctor.records import record

# after "%|": the bar, "|", then "n/total" and the optional timing in brackets
_REST = lazy(r"[^|\n]*\|\s*(?P<n>\d+)/(?P<total>\d+)\s*(?:\[[^\]\n]*\])?")
MAX_COUNT_DIGITS = 18  # a count beyond this is not a training's (and int() refuses 4,300 digits)
_DESC_STOP = "|\r\n"


@record(frozen=True)
class Bar:
    """A tqdm progress bar found in a line: where it is, its description and its count."""

    start: int
    end: int
    desc: str  # as the regex's group: everything before the percentage, trailing whitespace excluded
    n: int
    total: int
    shown: str  # the whole match


def find_bar(text: str, pos: int = 0) -> Bar | None:
    """The first bar at or after ``pos``, as ``re.search`` of the one-regex form would find it."""
    floor = pos
    at = text.find("%|", pos)
    while at >= 0:
        bar = _bar_at(text, at, floor, pos)
        if bar is not None:
            return bar
        floor = at + 1  # the "|" of this candidate bounds the next one's description
        at = text.find("%|", at + 1)
    return None


def _bar_at(text: str, at: int, floor: int, pos: int) -> Bar | None:
    digits = 0
    while digits < 3 and at - digits - 1 >= pos and text[at - digits - 1].isdecimal():
        digits += 1
    if not digits:
        return None
    rest = _REST.match(text, at + 2)
    if rest is None:
        return None
    n_text, total_text = rest.group("n"), rest.group("total")
    if len(n_text) > MAX_COUNT_DIGITS or len(total_text) > MAX_COUNT_DIGITS:
        return None
    ws = at - digits
    while ws > pos and text[ws - 1].isspace():
        ws -= 1
    stop = max(text.rfind(c, floor, ws) for c in _DESC_STOP)
    start = max(pos, stop + 1)
    return Bar(
        start=start,
        end=rest.end(),
        desc=text[start:ws] if start < ws else "",
        n=int(n_text),
        total=int(total_text),
        shown=text[start : rest.end()],
    )
