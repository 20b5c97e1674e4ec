"""Display-width tables (report/table.py): columns line up in Chinese and English."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oomdoctor.report.table import pad, table, width


def test_width_counts_a_chinese_character_as_two_columns() -> None:
    assert width("abc") == 3
    assert width("显存") == 4
    assert width("峰值 MiB") == 8
    assert width("") == 0


def test_pad_fills_to_the_display_width_on_either_side() -> None:
    assert pad("显存", 6) == "显存  "
    assert pad("12", 5, "right") == "   12"
    assert pad("too long", 3) == "too long"


def _column_starts(line: str, cells: list[str]) -> list[int]:
    """The display column where each cell begins in ``line``."""
    starts, at = [], 0
    for cell in cells:
        at = line.index(cell, at)
        starts.append(width(line[:at]))
        at += len(cell)
    return starts


def test_columns_line_up_in_chinese_and_english() -> None:
    headers = ["试验", "峰值 MiB", "outcome"]
    rows = [["baseline", "12,345", "显存不足"], ["试验二", "9", "ok"]]
    lines = table(headers, rows, align=["left", "right", "left"])
    assert len(lines) == 4
    assert lines[1] == "--------  --------  --------"  # 显存不足 is 8 columns wide
    starts = [
        _column_starts(line, cells)
        for line, cells in zip([lines[0], *lines[2:]], [headers, *rows], strict=True)
    ]
    assert starts[0][0] == starts[1][0] == starts[2][0] == 0
    assert starts[0][2] == starts[1][2] == starts[2][2]
    # the right-aligned column ends at the same column on every line
    ends = [s[1] + width(c[1]) for s, c in zip(starts, [headers, *rows], strict=True)]
    assert len(set(ends)) == 1


def test_no_header_no_rule_and_trailing_spaces_dropped() -> None:
    assert table(None, [["a", ""], ["bb", "c"]], indent="  ") == ["  a", "  bb  c"]
    assert table(None, []) == []


def test_a_ragged_row_is_refused() -> None:
    with pytest.raises(ValueError, match="one cell per column"):
        table(["a", "b"], [["only one"]])


_CELL = st.text(alphabet=st.sampled_from("ab1 显存峰值"), max_size=6).map(str.strip)


@given(st.lists(st.lists(_CELL, min_size=3, max_size=3), min_size=1, max_size=5))
def test_every_line_is_as_wide_as_its_cells_and_gaps(rows: list[list[str]]) -> None:
    lines = table(["x", "y", "z"], rows)
    widths = [max(width(r[i]) for r in [["x", "y", "z"], *rows]) for i in range(3)]
    assert width(lines[1]) == sum(widths) + 4
    assert all(width(line) <= sum(widths) + 4 for line in lines)
