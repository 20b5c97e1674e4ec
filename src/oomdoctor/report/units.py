"""How oomdoctor writes numbers for people: the one set of formatters every report, the compare table, the
watch frame and the app use.

Pure functions of the standard library alone (no oomdoctor import), so any report can use them without
pulling anything onto the start-up path. Sizes come in MiB (the project's unit, ``_mib``) and are written in
binary units, as PyTorch's out-of-memory message writes them. Thousands are separated by commas. A value
nobody knows (``None``), or one that is not a number a person can use (NaN, infinity), is written as
``missing``: a dash unless the caller says otherwise.
"""

from __future__ import annotations

import math

DASH = "-"
MIB_PER_GIB = 1024
# From here on a number has more digits than anyone reads (1e18 MiB is a million exbibytes): it is written
# in scientific notation, so a line stays a line.
HUGE = 1e18
METER_WIDTH = 30
# The suffixes of a large count (parameters, tokens), largest first.
_COUNT_UNITS = (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3))


def _finite(value: float | None) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def number(value: float | None, digits: int = 0, *, signed: bool = False, missing: str = DASH) -> str:
    """``12345.6`` -> ``12,346``; ``digits`` after the point; ``signed`` writes ``+`` before a gain.

    A value that rounds to zero is written without a minus (``-0.2`` -> ``0``, signed ``+0``); one of
    ``HUGE`` or more as ``1.0e+21``.
    """
    v = _finite(value)
    if v is None:
        return missing
    if abs(v) >= HUGE:
        return f"{v:{'+' if signed else ''}.1e}"
    if round(v, digits) == 0:
        v = 0.0
    return f"{v:{'+' if signed else ''},.{digits}f}"


def mib(
    value_mib: float | None,
    *,
    digits: int = 0,
    unit: bool = True,
    signed: bool = False,
    missing: str = DASH,
) -> str:
    """Whole MiB: ``12,346 MiB`` (``unit=False``: ``12,346``, for a column headed MiB; ``digits=1`` for a
    file's size, ``0.5 MiB``)."""
    text = number(value_mib, digits, signed=signed, missing=missing)
    return f"{text} MiB" if unit and text != missing else text


def gib(
    value_mib: float | None,
    *,
    digits: int = 2,
    unit: bool = True,
    signed: bool = False,
    missing: str = DASH,
) -> str:
    """MiB written as GiB: ``2375.7`` -> ``2.32 GiB`` (``unit=False``: ``2.32``)."""
    v = _finite(value_mib)
    text = number(None if v is None else v / MIB_PER_GIB, digits, signed=signed, missing=missing)
    return f"{text} GiB" if unit and text != missing else text


def size(value_mib: float | None, *, gib_digits: int = 2, missing: str = DASH) -> str:
    """``512 MiB`` below a GiB, ``2.32 GiB`` from one GiB on; the unit is chosen after rounding, so 1023.7
    MiB is ``1.00 GiB``, never ``1,024 MiB``."""
    v = _finite(value_mib)
    if v is None:
        return missing
    if abs(round(v)) >= MIB_PER_GIB:
        return gib(v, digits=gib_digits)
    return mib(v)


def count(value: float | None, *, missing: str = DASH) -> str:
    """A large count, short: ``596049920`` -> ``596M``, ``7615616512`` -> ``7.6B``; below a thousand whole.

    One digit after the point below ten of a unit; the unit is chosen after rounding (``999950`` -> ``1.0M``).
    """
    v = _finite(value)
    if v is None:
        return missing
    sign, v = ("-" if v < 0 else ""), abs(v)
    for suffix, unit_size in _COUNT_UNITS:  # largest first: a value that rounds up lands in the larger unit
        scaled = v / unit_size
        shown = round(scaled, 1) if scaled < 10 else round(scaled)
        if shown >= 1:
            text = f"{shown:.1f}" if shown < 10 else number(shown)
            return f"{sign}{text}{suffix}"
    return f"{sign}{round(v)}" if round(v) else "0"


def percent(value_pct: float | None, digits: int = 0, *, missing: str = DASH) -> str:
    """A value already in percent (``util_pct``, ``100 * share``): ``37.4`` -> ``37%``."""
    text = number(value_pct, digits, missing=missing)
    return text if text == missing else f"{text}%"


def watts(value_w: float | None, *, missing: str = DASH) -> str:
    """Power drawn, whole watts: ``251.6`` -> ``252 W``."""
    text = number(value_w, missing=missing)
    return text if text == missing else f"{text} W"


def seconds(value_s: float | None, digits: int = 2, *, signed: bool = False, missing: str = DASH) -> str:
    """Seconds as a number with its unit: ``41.3`` -> ``41.30 s``."""
    text = number(value_s, digits, signed=signed, missing=missing)
    return text if text == missing else f"{text} s"


def meter(used: float | None, total: float | None, width: int = METER_WIDTH) -> str:
    """``used`` of ``total`` as a bar of ``width`` cells, ``[|||||     ]``; empty when either is unknown,
    full (never longer) when ``used`` is over ``total``."""
    u, t = _finite(used), _finite(total)
    share = u / t if u is not None and t is not None and u > 0 and t > 0 else 0.0
    filled = min(width, round(width * share))
    return "[" + "|" * filled + " " * (width - filled) + "]"


def duration(value_s: float | None, *, missing: str = DASH) -> str:
    """A span as a clock: ``3723`` -> ``1:02:03`` (hours grow past 24; a negative span has a minus)."""
    v = _finite(value_s)
    if v is None:
        return missing
    if abs(v) >= HUGE:
        return seconds(v, missing=missing)
    sign, whole = ("-" if v < 0 else ""), int(abs(v))
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{sign if whole else ''}{hours}:{minutes:02d}:{secs:02d}"
