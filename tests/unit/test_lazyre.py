"""A lazily compiled pattern behaves as the compiled one, and compiles only when it is used."""

from __future__ import annotations

import copy
import pickle
import re

from oomdoctor.lazyre import LazyPattern, lazy


def test_the_pattern_text_is_there_without_compiling() -> None:
    rx = lazy(r"(?P<n>\d+)/(?P<total>\d+)")
    assert rx.pattern == r"(?P<n>\d+)/(?P<total>\d+)"
    assert isinstance(rx, LazyPattern) and rx._compiled is None


def test_first_use_compiles_and_answers_as_re_does() -> None:
    text = "step 12/50 and 3/4"
    rx, real = lazy(r"(?P<n>\d+)/(?P<total>\d+)"), re.compile(r"(?P<n>\d+)/(?P<total>\d+)")
    m = rx.search(text)
    assert m is not None and m.group("n") == "12"
    assert isinstance(rx, LazyPattern) and rx._compiled is not None
    assert [x.groups() for x in rx.finditer(text)] == [x.groups() for x in real.finditer(text)]
    assert rx.sub("#", text) == real.sub("#", text)
    assert rx.groupindex == real.groupindex and rx.groups == real.groups and rx.flags == real.flags


def test_flags_and_bytes_patterns_are_kept() -> None:
    assert lazy(r"world size", re.IGNORECASE).search("WORLD SIZE: 8") is not None
    rx = lazy(rb"\S")
    m = rx.search(b"  x")
    assert m is not None and m.start() == 2


def test_equal_by_pattern_and_flags_and_usable_as_a_cache_key() -> None:
    assert lazy("a+") == lazy("a+") and hash(lazy("a+")) == hash(lazy("a+"))
    assert lazy("a+") != lazy("a+", re.IGNORECASE)
    assert len({lazy("a+"), lazy("a+"), lazy("b")}) == 2


def test_copies_and_pickles_before_and_after_first_use() -> None:
    fresh, used = lazy("x(y)"), lazy("x(y)")
    used.search("xy")
    for rx in (fresh, used):
        for twin in (copy.deepcopy(rx), pickle.loads(pickle.dumps(rx))):
            m = twin.match("xy")
            assert m is not None and m.group(1) == "y"
