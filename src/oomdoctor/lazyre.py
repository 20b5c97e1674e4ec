"""Regular expressions compiled on first use.

``re.compile`` parses and compiles in Python code, some 0.05-0.2 ms a pattern; the log reader alone holds over
a hundred patterns and a given log needs about half of them (a family whose hint never matched is never
searched). ``lazy(...)`` stands where ``re.compile(...)`` stood: ``.pattern`` is there at once (the needle
derivation of ``facts/log_needles.py`` reads only that), and the first use of anything else compiles the
pattern and binds its methods onto the instance, so later calls cost what they cost on the compiled pattern.

A log still needs some sixty of them, 6-9 ms of every ``diagnose`` start spent in ``re``'s parser and
compiler, written in Python. So ``compile_pattern`` (what a first use calls) keeps each pattern's compiled form
in the user cache: the opcode list and group tables ``re`` itself hands to ``_sre.compile``, built by ``re``'s
own parser and code generator, keyed by the exact interpreter version and the regex engine's magic number.
A later start rebuilds the pattern from that form in microseconds; ``_sre.compile`` checks the code it is
given, and the result equals what ``re.compile`` returns (``Pattern.__eq__`` compares the code, and a test
checks every pattern of the tables). An interpreter whose internals differ, or a form it refuses, gets a
plain ``re.compile``. The forms compiled anew by a start are written once, when its verb ends (``cli.main``).
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]  # re's engine, built in: what re.compile ends in
import re
import sys
from typing import Any, AnyStr, cast

_KIND = "patterns-v1"
_MOST_FORMS = 2000  # the tables and the code hold a few hundred
# The compiled forms: (flags, code, groups, groupindex, indexgroup) by (pattern, flags).
Form = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
# The user cache's forms, read on the first compile.
_stored: dict[tuple[str | bytes, int], Form] | None = None
_added: dict[tuple[str | bytes, int], Form] = {}  # forms made by this process and not written yet
_made: dict[tuple[str | bytes, int], re.Pattern[Any]] = {}


def compile_pattern(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """``re.compile(pattern, flags)``, rebuilt from the user cache's compiled form when it has one."""
    key = (pattern, int(flags))
    rx = _made.get(key)
    if rx is None:
        rx = _made[key] = _from_store(key) or _compile_and_keep(key)
    return rx


def _entry_key() -> str:
    from oomdoctor import usercache

    versions = [("python", sys.version.encode()), ("sre", str(_sre.MAGIC).encode())]
    return usercache.content_key(_KIND, versions)


def _store() -> dict[tuple[str | bytes, int], Form]:
    global _stored
    if _stored is None:
        from oomdoctor import usercache

        payload = usercache.read(_KIND, _entry_key())
        _stored = payload if isinstance(payload, dict) else {}
    return _stored


def _from_store(key: tuple[str | bytes, int]) -> re.Pattern[Any] | None:
    form = _store().get(key)
    if form is None:
        return None
    try:
        return _sre.compile(key[0], *form)  # type: ignore[no-any-return]
    except (TypeError, ValueError, RuntimeError):  # a damaged entry, or a form this interpreter refuses
        return None


def _compile_and_keep(key: tuple[str | bytes, int]) -> re.Pattern[Any]:
    pattern, flags = key
    try:
        from re import _compiler, _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern, flags)
        groupindex = dict(parsed.state.groupdict)
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, index in groupindex.items():
            indexgroup[index] = name
        code = [
            int(op) for op in _compiler._code(parsed, flags)
        ]  # opcodes are int subclasses: plain for marshal
        form: Form = (
            flags | parsed.state.flags,
            code,
            parsed.state.groups - 1,
            groupindex,
            tuple(indexgroup),
        )
        rx: re.Pattern[Any] = _sre.compile(pattern, *form)
    except re.error:
        raise
    except Exception:  # noqa: BLE001 - re's internals are not this shape here: compile as re does
        return re.compile(pattern, flags)
    _added[key] = form
    return rx


def keep_new_forms() -> None:
    """Add the forms compiled since the last call to the user cache's entry (re-read first: another start may
    have added some). The command line calls it when a verb ends; nothing to do, no file touched, on a start
    that found every pattern it used."""
    if not _added:
        return
    from oomdoctor import usercache

    key = _entry_key()
    now = usercache.read(_KIND, key)
    merged = dict(now) if isinstance(now, dict) else {}
    merged.update(_added)
    if len(merged) > _MOST_FORMS:  # patterns made from changing text: keep this start's alone
        merged = dict(_added)
    usercache.write(_KIND, key, merged)
    _added.clear()


# What the first use binds onto the instance; anything else is looked up on the compiled pattern each time.
_BOUND = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner")
_COPIED = ("flags", "groups", "groupindex")


class LazyPattern:
    """``re.compile(pattern, flags)``, built the first time it is used."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[Any] | None = None

    def compiled(self) -> re.Pattern[Any]:
        """The compiled pattern (compiled now, on the first call)."""
        rx = self._compiled
        if rx is None:
            rx = compile_pattern(self.pattern, self._flags)
            for name in _BOUND:
                setattr(self, name, getattr(rx, name))
            for name in _COPIED:
                setattr(self, name, getattr(rx, name))
            self._compiled = rx
        return rx

    def __getattr__(self, name: str) -> Any:
        # Called only for a name the instance does not hold yet: the first use of a method or attribute.
        if name.startswith("__") or name == "_compiled":
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyPattern):
            return (self.pattern, self._flags) == (other.pattern, other._flags)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.pattern, self._flags))

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """A pattern that compiles itself on first use; typed as the pattern it stands for."""
    return cast("re.Pattern[AnyStr]", LazyPattern(pattern, flags))
