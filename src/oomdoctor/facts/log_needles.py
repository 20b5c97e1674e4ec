"""The byte strings that every log line the scanner acts on holds, and one bytes regex that finds them.

A big log is mostly progress bars, loss dicts and plain per-step lines. The big-file reader
(``facts/log_window.py``) searches the raw bytes for these needles, the way grep does, and decodes and
scans only the windows around them. The needles are not a second copy of the knowledge: they are derived
from the same regexes the scanner applies (``log_markers.yaml`` and ``log_scan.py``): for each regex, a set of
literal strings one of which every match contains. When a regex yields no such set, the big-file reader
is not used (``hit_pattern()`` is None) and the log is read line by line as before.

Only ASCII literals are taken from regexes (they are the same bytes in UTF-8 and GBK, and decoding never
joins ASCII bytes that were apart); the plain hints of the tables may be non-ASCII and are searched in both
encodings.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

try:  # Python 3.11+
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c
    import sre_parse as _sre_parse

Option = frozenset[str]
_REPEATS = tuple(
    op for op in (getattr(_c, n, None) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")) if op
)


def required_literals(pattern: str) -> Option | None:
    """Literal ASCII strings of which every match of ``pattern`` holds at least one; None when there is no
    such set (a branch without a literal, a case-insensitive part)."""
    try:
        tree = _sre_parse.parse(pattern)
    except re.error:
        return None
    if tree.state.flags & re.IGNORECASE:
        return None
    return _sequence(list(tree))


def _sequence(items: list[tuple[object, object]]) -> Option | None:
    options: list[Option] = []
    run: list[str] = []
    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))  # type: ignore[arg-type]
            continue
        _flush(run, options)
        sub = _item(op, av)
        if sub:
            options.append(sub)
    _flush(run, options)
    return max(options, key=_score, default=None)


def _item(op: object, av: Any) -> Option | None:
    """The literals an item of a parsed regex requires (``av`` is sre_parse's argument tuple for ``op``)."""
    if op is _c.SUBPATTERN:
        _group, add_flags, _del_flags, body = av
        return None if int(add_flags) & re.IGNORECASE else _sequence(list(body))
    if op is _c.BRANCH:
        subs = [_sequence(list(b)) for b in av[1]]
        return frozenset().union(*[x for x in subs if x]) if all(subs) else None
    if op in _REPEATS:
        low, _high, body = av
        return _sequence(list(body)) if int(low) >= 1 else None
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _sequence(list(av))
    return None


def _flush(run: list[str], options: list[Option]) -> None:
    """A run of literal characters is required as a whole; so is its longest ASCII piece."""
    if run:
        pieces = re.findall(r"[\x00-\x7f]+", "".join(run))
        if pieces:
            options.append(frozenset([max(pieces, key=len)]))
    run.clear()


def _score(option: Option) -> tuple[int, int]:
    """Longer needles hit fewer ordinary lines; fewer of them make a faster search."""
    return min(len(s) for s in option), -len(option)


def needle_bytes(needles: Iterable[str]) -> list[bytes]:
    """Each needle in UTF-8, and non-ASCII ones in GBK too; needles holding a shorter one are dropped."""
    out: set[bytes] = set()
    for n in needles:
        if not n:
            continue
        out.add(n.encode("utf-8"))
        if not n.isascii():
            with contextlib.suppress(UnicodeEncodeError):
                out.add(n.encode("gbk"))
    kept: list[bytes] = []
    for needle in sorted(out, key=len):
        if not any(k in needle for k in kept):
            kept.append(needle)
    return sorted(kept, key=len, reverse=True)


def _scanner_needles() -> list[str] | None:
    """Needles for every line the scanner does more with than keep it as context (see LogScanner._segment)."""
    from oomdoctor.facts import launcher, log_data_parallel, log_host_report
    from oomdoctor.facts import log_scan as s
    from oomdoctor.facts.log_tables import tables

    t = tables()
    raw = t.raw
    needles: list[str] = [s.TRACEBACK_HEADER, s.RICH_BOX, "╰", "ZeRO stage", "zero_optimization_stage"]
    needles += [h for form in t.oom_forms for h in form.hints]
    needles += list(raw["card_names"]["hint"])
    needles += list(t.load_bars)
    needles += ["'eval_loss'", "'train_runtime'"]  # the dict keys other than the training loss
    needles += list(s.NONFINITE_NEEDLES)
    needles.append(log_host_report.HINT)  # the host's RAM report (diag6c)
    needles += list(log_data_parallel.HINTS)  # a DataParallel run (diag6c)
    patterns = [
        s.FILE_LINE.pattern,
        s.IPYTHON_FILE_LINE.pattern,
        s.IPYTHON_CELL_LINE.pattern,
        s.FRAGMENT_LINE.pattern,
        s.PYTEST_LINE.pattern,
        s.ELIDED_MARK.pattern,
        s._NOTEBOOK_BAR.pattern,
        s._EXCEPTION_LINE.pattern,
        s._BANNER_HINT.pattern,
        launcher.HINT.pattern,
        *raw["run_start"],
        *(w["pattern"] for w in raw["allocator_warnings"]),
        *(z["pattern"] for z in raw["zero_stage"]["lines"]),
    ]
    if step_counter_literals() is None:
        # a step line with no literal cannot be summed up in the gaps: its lines are read as hits instead
        patterns += [c["pattern"] for c in raw.get("step_counters") or ()]
    for p in patterns:
        option = required_literals(p)
        if option is None:
            return None
        needles += option
    for m in raw["markers"]:
        # a marker's hints are in every line it matches (tests/unit/test_log_round6.py): they stand in where
        # its pattern has no ASCII literal (a Chinese sentence)
        option = required_literals(m["pattern"]) or (frozenset(m["hint"]) if m.get("hint") else None)
        if option is None:
            return None
        needles += option
    return needles


@functools.lru_cache(maxsize=1)
def step_counter_literals() -> tuple[bytes, ...] | None:
    """For each step line of the tables (``step_counters``), the literals one of which its lines hold: the
    big-file reader sums step lines up in the gaps (their last one), as it does bars and loss dicts, instead
    of reading each as a hit. None when a step line has none."""
    from oomdoctor.facts.log_tables import tables

    found: list[bytes] = []
    for counter in tables().raw.get("step_counters") or ():
        option = required_literals(counter["pattern"])
        if option is None:
            return None
        found += [n.encode("utf-8") for n in option]
    return tuple(sorted(set(found)))


_KIND = "log-needles-v3"


def _cached_needles() -> list[str] | None:
    """The needles (None: a regex has none)."""
    return _needle_entry()[0]


def _needle_entry() -> tuple[list[str] | None, list[bytes] | None]:
    """The needles and the bytes searched for them (``needle_bytes``), derived once per content of the files
    they come from and kept in the user cache: parsing some thirty regexes, and encoding the hints in GBK
    (which loads the codec), cost a start more than reading a small JSON entry."""
    from oomdoctor import usercache
    from oomdoctor.facts import launcher, log_scan
    from oomdoctor.facts.log_tables import MARKERS_FILE

    sources = [Path(__file__), Path(log_scan.__file__), Path(launcher.__file__), MARKERS_FILE]
    try:
        key = usercache.content_key(_KIND, [(p.name, p.read_bytes()) for p in sources])
    except OSError:
        return _derived()
    cached = usercache.read(_KIND, key)
    if isinstance(cached, dict) and "needles" in cached:
        needles, found = cached["needles"], cached.get("bytes")
        if needles is None and found is None:
            return None, None
        if _strings(needles) and _strings(found):
            return list(needles), [x.encode("latin-1") for x in found]
    needles, found = _derived()
    as_text = None if found is None else [b.decode("latin-1") for b in found]  # bytes as JSON strings
    usercache.write(_KIND, key, {"needles": needles, "bytes": as_text})
    return needles, found


def _derived() -> tuple[list[str] | None, list[bytes] | None]:
    needles = _scanner_needles()
    return needles, None if needles is None else needle_bytes(needles)


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


@functools.lru_cache(maxsize=1)
def hit_pattern() -> Any | None:
    """One compiled search for every needle (on first use), with ``.search(buf, pos, endpos)``; None when a
    regex has no needles. RE2 (google-re2) runs a literal alternation as a DFA, several times faster than
    ``re`` on text where many bytes start a needle; ``re`` serves where RE2 is not installed."""
    found = _needle_entry()[1]
    if found is None:
        return None
    pattern = b"|".join(re.escape(n) for n in found)
    try:
        import re2
    except ImportError:
        return re.compile(pattern)
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # bytes, not UTF-8: a log may hold any byte
    return re2.compile(pattern, options)
