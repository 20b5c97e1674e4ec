"""The one set of number formatters (report/units.py): sizes, counts, percentages, times, signed deltas."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomdoctor.report import units

NOT_A_NUMBER = [None, math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("value", NOT_A_NUMBER)
def test_a_missing_or_non_finite_value_is_a_dash_in_every_formatter(value: float | None) -> None:
    shown = [
        units.number(value), units.mib(value), units.gib(value), units.size(value), units.count(value),
        units.percent(value), units.watts(value), units.seconds(value), units.duration(value),
    ]  # fmt: skip
    assert shown == [units.DASH] * len(shown)


def test_the_caller_can_name_what_a_missing_value_reads() -> None:
    assert units.size(None, missing="n/a") == "n/a"
    assert units.mib(math.nan, missing="?") == "?"


@pytest.mark.parametrize(
    ("value", "digits", "signed", "text"),
    [
        (0, 0, False, "0"),
        (12345.6, 0, False, "12,346"),
        (-6358.2, 0, True, "-6,358"),
        (6358.2, 0, True, "+6,358"),
        (-0.2, 0, False, "0"),  # rounds to zero: no minus
        (-0.2, 0, True, "+0"),
        (1234.5678, 2, False, "1,234.57"),
        (1_000_000_000, 0, False, "1,000,000,000"),
    ],
)
def test_number_separates_thousands_and_signs_a_delta(
    value: float, digits: int, signed: bool, text: str
) -> None:
    assert units.number(value, digits, signed=signed) == text


def test_a_huge_number_stays_one_short_word() -> None:
    assert units.number(1e300) == "1.0e+300"
    assert units.mib(-1e30, signed=True) == "-1.0e+30 MiB"
    assert units.duration(1e300) == "1.0e+300 s"


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False))
def test_number_without_its_commas_is_the_rounded_value(value: float) -> None:
    assert float(units.number(value).replace(",", "")) == float(f"{value:.0f}") or round(value) == 0


def test_mib_and_gib_write_the_unit_unless_the_column_has_it() -> None:
    assert units.mib(3963 / 4) == "991 MiB"
    assert units.mib(12345, unit=False) == "12,345"
    assert units.mib(0.5, digits=1) == "0.5 MiB"
    assert units.gib(2375.7) == "2.32 GiB"
    assert units.gib(420, digits=2) == "0.41 GiB"
    assert units.gib(-6358, signed=True, unit=False) == "-6.21"
    assert units.gib(2_000_000) == "1,953.12 GiB"
    assert units.gib(1536, digits=1) == "1.5 GiB"


@pytest.mark.parametrize(
    ("value_mib", "text"),
    [
        (0, "0 MiB"),
        (512, "512 MiB"),
        (1000, "1,000 MiB"),
        (1023.4, "1,023 MiB"),
        (1023.6, "1.00 GiB"),  # the unit is chosen after rounding: never "1,024 MiB"
        (1024, "1.00 GiB"),
        (2375.7, "2.32 GiB"),
        (-2048, "-2.00 GiB"),
        (-300, "-300 MiB"),
    ],
)
def test_size_switches_to_gib_at_one_gib(value_mib: float, text: str) -> None:
    assert units.size(value_mib) == text


def test_size_can_write_gib_with_one_digit() -> None:
    assert units.size(1536, gib_digits=1) == "1.5 GiB"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (950, "950"),
        (999.96, "1.0K"),  # rounds up into the next unit
        (596_049_920, "596M"),
        (999_950, "1.0M"),
        (7_615_616_512, "7.6B"),
        (9_960_000_000, "10B"),
        (2e15, "2,000T"),
        (-1234.5, "-1.2K"),
        (0.4, "0"),
    ],
)
def test_count_is_short_with_a_suffix(value: float, text: str) -> None:
    assert units.count(value) == text


def test_percent_and_seconds_carry_their_unit() -> None:
    assert units.percent(37.4) == "37%"
    assert units.percent(37.46, 1) == "37.5%"
    assert units.percent(0) == "0%"
    assert units.watts(251.6) == "252 W"
    assert units.watts(1500) == "1,500 W"
    assert units.seconds(41.3) == "41.30 s"
    assert units.seconds(-1.5, signed=True) == "-1.50 s"
    assert units.seconds(1234.5, 1) == "1,234.5 s"


@pytest.mark.parametrize(
    ("value_s", "text"),
    [(0, "0:00:00"), (59.9, "0:00:59"), (3723, "1:02:03"), (90_000, "25:00:00"), (-65, "-0:01:05"),
     (-0.5, "0:00:00")],
)  # fmt: skip
def test_duration_is_a_clock(value_s: float, text: str) -> None:
    assert units.duration(value_s) == text


def test_a_bool_is_not_a_number() -> None:
    assert units.number(True) == units.DASH  # type: ignore[arg-type]


def _loaded_after(statement: str) -> set[str]:
    import json
    import subprocess
    import sys

    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in json.loads(out.stdout.strip().splitlines()[-1])}


def test_the_presentation_layer_is_light_to_import() -> None:
    """units needs the standard library alone; table adds rich's width tables, never textual or pydantic."""
    bare = _loaded_after("pass")
    assert _loaded_after("import oomdoctor.report.units") - bare <= {"oomdoctor", "__future__", "math"}
    table = _loaded_after("import oomdoctor.report.table") - bare
    assert "rich" in table
    assert not table & {"textual", "pydantic", "yaml", "torch"}


@pytest.mark.parametrize(
    ("used", "total", "bar"),
    [(50, 100, "[|||||     ]"), (200, 100, "[||||||||||]"), (None, 100, "[          ]"), (50, 0, "[          ]"),
     (-5, 100, "[          ]"), (math.nan, 100, "[          ]"), (0.4, 100, "[          ]"), (96, 100, "[||||||||||]")],
)  # fmt: skip
def test_meter_is_never_longer_than_its_width(used: float | None, total: float, bar: str) -> None:
    assert units.meter(used, total, width=10) == bar
