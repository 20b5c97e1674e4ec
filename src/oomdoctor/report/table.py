"""Text tables for a terminal, aligned by display width: a Chinese character takes two columns.

The width of a string comes from ``rich.cells.cell_len`` (rich's Unicode width tables, kept up to date with
each Unicode release and already installed as textual's own renderer): ``len()`` counts a wide character as
one column, and ``unicodedata.east_asian_width`` alone misses combining marks, zero-width joiners and emoji
presentation. Only the width is taken from rich; nothing here imports textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from rich.cells import cell_len

Align = Literal["left", "right"]
GAP = "  "


def width(text: str) -> int:
    """The columns ``text`` takes on a terminal."""
    return cell_len(text)


def pad(text: str, columns: int, align: Align = "left") -> str:
    """``text`` padded with spaces to ``columns`` display columns (a longer text is left as it is)."""
    fill = " " * max(0, columns - width(text))
    return text + fill if align == "left" else fill + text


def table(
    headers: Sequence[str] | None,
    rows: Sequence[Sequence[str]],
    *,
    align: Sequence[Align] | None = None,
    indent: str = "",
    rule: str = "-",
) -> list[str]:
    """The lines of a table: the headers, a rule under each column, the rows (no header: no rule).

    Columns are as wide as their widest cell and two spaces apart; ``align`` gives each column's side (left
    by default); trailing spaces are dropped. Every row has as many cells as the first line.
    """
    lines = [list(headers)] if headers is not None else []
    lines += [list(row) for row in rows]
    if not lines:
        return []
    n = len(lines[0])
    sides: Sequence[Align] = align if align is not None else ["left"] * n
    if any(len(line) != n for line in lines) or len(sides) != n:
        raise ValueError("every row of a table needs one cell per column")
    widths = [max(width(line[i]) for line in lines) for i in range(n)]

    def join(cells: Sequence[str]) -> str:
        return (
            indent + GAP.join(pad(c, w, s) for c, w, s in zip(cells, widths, sides, strict=True))
        ).rstrip()

    out = [join(line) for line in lines]
    if headers is not None:
        out.insert(1, join([rule * w for w in widths]))
    return out
