"""A lazily compiled pattern behaves as the compiled one, and compiles only when it is used."""

from __future__ import annotations

import copy
import gc
import pickle
import re
from pathlib import Path

import pytest

from oomdoctor import lazyre
from oomdoctor.lazyre import LazyPattern, compile_pattern, lazy


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


# --- the compiled forms kept in the user cache ------------------------------------------------------------


@pytest.fixture
def fresh_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user cache, and this process's memory of compiled forms forgotten (as in a new start)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(lazyre, "_stored", None)
    monkeypatch.setattr(lazyre, "_added", {})
    monkeypatch.setattr(lazyre, "_made", {})
    return tmp_path


def _new_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lazyre, "_stored", None)
    monkeypatch.setattr(lazyre, "_made", {})


def test_a_kept_form_rebuilds_the_same_pattern_in_the_next_start(fresh_forms: Path, monkeypatch) -> None:
    source, flags = r"(?P<n>\d+)/(?P<total>\d+)\s*\[(?i:it)", re.MULTILINE
    first = compile_pattern(source, flags)
    assert first == re.compile(source, flags)  # Pattern equality compares the compiled code
    lazyre.keep_new_forms()
    assert list((fresh_forms / "oomdoctor" / "patterns-v1").glob("*.marshal"))
    _new_start(monkeypatch)
    again = compile_pattern(source, flags)
    assert lazyre._stored and (source, flags) in lazyre._stored and not lazyre._added  # read, not compiled
    assert again == re.compile(source, flags) and again.groupindex == {"n": 1, "total": 2}
    assert again.search("x 12/50 [IT]").group("total") == "50"  # type: ignore[union-attr]


def test_a_start_that_compiled_nothing_new_writes_nothing(fresh_forms: Path, monkeypatch) -> None:
    compile_pattern("a+b")
    lazyre.keep_new_forms()
    entry = next((fresh_forms / "oomdoctor" / "patterns-v1").glob("*.marshal"))
    written = entry.stat().st_mtime_ns
    _new_start(monkeypatch)
    compile_pattern("a+b")
    lazyre.keep_new_forms()
    assert entry.stat().st_mtime_ns == written


def test_a_damaged_or_refused_form_is_compiled_afresh(fresh_forms: Path, monkeypatch) -> None:
    compile_pattern("x(y)z")
    lazyre.keep_new_forms()
    _new_start(monkeypatch)
    stored = lazyre._store()
    flags, code, *rest = stored[("x(y)z", 0)]
    stored[("x(y)z", 0)] = (flags, [999999, *code], *rest)  # an opcode _sre does not know
    rx = compile_pattern("x(y)z")
    assert rx == re.compile("x(y)z") and rx.match("xyz").group(1) == "y"  # type: ignore[union-attr]


def test_a_bad_pattern_raises_as_re_compile_does(fresh_forms: Path) -> None:
    with pytest.raises(re.error):
        compile_pattern("(unclosed")
    assert not lazyre._added


def test_every_pattern_of_the_log_reader_rebuilt_from_its_form_equals_re_compile(fresh_forms: Path) -> None:
    from oomdoctor.facts import log, log_scan, log_tables  # noqa: F401 - the modules holding the patterns

    log_tables.tables()
    patterns = {(o.pattern, o._flags) for o in gc.get_objects() if type(o) is LazyPattern}
    assert len(patterns) > 100
    for source, flags in patterns:
        compile_pattern(source, flags)
    lazyre.keep_new_forms()
    lazyre._stored, lazyre._made = None, {}
    for source, flags in patterns:
        assert compile_pattern(source, flags) == re.compile(source, flags), source
    assert not lazyre._added
