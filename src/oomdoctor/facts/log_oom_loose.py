"""The numbers of an out-of-memory message whose words were mangled: text recognised from a screenshot (OCR),
or a copy that lost spaces. "Tried t allocate 388.00 MiB (GPV 0; 39.43 GiB total capacity; 37.42 GiB already
allocated; 126.25 MiBfree; ...)": the strict patterns of facts/log_oom.py miss the request (a letter dropped)
and the free memory (the space before "free" gone).

Read only for the fields the strict reading left empty, and only from the message's own clauses: the request
after a verb that still looks like "tried to allocate", and each ";"-separated clause of the old format by the
word it still holds (total / capacity, already / allocated, free, reserved). A number that cannot be what its
clause says (larger than the card's capacity, as when OCR lost a decimal point: "3764 GiB reserved" on a
39.43 GiB card) is not read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from oomdoctor.lazyre import lazy

# a size whose unit may have lost the space after it ("126.25 MiBfree")
_LOOSE_SIZE = r"(\d[\d,]{0,24}(?:\.\d{1,12})?)\s*(TiB|GiB|MiB|KiB|TB|GB|MB|KB)"
_REQUEST = lazy(r"[Tt]r?ied\s{0,3}t?o?\s{0,3}al{1,2}oc?ate\s{0,3}" + _LOOSE_SIZE)
_CLAUSE_SIZE = lazy(_LOOSE_SIZE)
# old-format clause words -> the field they state, first match wins ("already allocated" before "reserved")
_CLAUSE_WORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("total", "capac"), "capacity_mib"),
    (("already", "allocated"), "allocated_mib"),
    (("reserved", "cached"), "reserved_mib"),
    (("free",), "free_mib"),
)
_MAX_CLAUSES = 12


class _Numbers(Protocol):
    requested_mib: float | None
    capacity_mib: float | None
    free_mib: float | None
    allocated_mib: float | None
    reserved_mib: float | None


ToMib = Callable[[str, str], float]


def fill_loose(n: _Numbers, text: str, convert: ToMib) -> None:
    """Set the fields of ``n`` still None from the mangled message ``text`` (``convert``: log_oom.size_to_mib)."""
    if n.requested_mib is None:
        m = _REQUEST.search(text)
        if m:
            n.requested_mib = convert(m.group(1), m.group(2))
    for clause in _clauses(text):
        _fill_clause(n, clause, convert)


def _clauses(text: str) -> list[str]:
    """The ";"-separated clauses of the old format's parenthesis, when the message has one."""
    if ";" not in text:
        return []
    start = text.find("(")
    body = text[start + 1 :] if start >= 0 else text
    return body.split(";")[:_MAX_CLAUSES]


def _fill_clause(n: _Numbers, clause: str, convert: ToMib) -> None:
    lowered = clause.lower()
    m = _CLAUSE_SIZE.search(clause)
    if m is None:
        return
    for words, name in _CLAUSE_WORDS:
        if not any(w in lowered for w in words):
            continue
        if getattr(n, name) is not None:
            return
        value = convert(m.group(1), m.group(2))
        capacity = n.capacity_mib
        if name != "capacity_mib" and capacity is not None and value > capacity * 1.01:
            return  # cannot be: the card holds less (a decimal point lost)
        setattr(n, name, value)
        return
