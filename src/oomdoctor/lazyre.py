"""Regular expressions compiled on first use.

``re.compile`` parses and compiles in Python code, some 0.05-0.2 ms a pattern; the log reader alone holds over
a hundred patterns and a given log needs about half of them (a family whose hint never matched is never
searched). ``lazy(...)`` stands where ``re.compile(...)`` stood: ``.pattern`` is there at once (the needle
derivation of ``facts/log_needles.py`` reads only that), and the first use of anything else compiles the
pattern and binds its methods onto the instance, so later calls cost what they cost on the compiled pattern.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

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
            rx = re.compile(self.pattern, self._flags)
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
