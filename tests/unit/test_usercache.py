"""The user cache (usercache.py): marshal entries keyed by content, misses instead of errors, and each kind's
folder bounded (the newest entries kept, the JSON entries of earlier versions removed) when it is written."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from oomdoctor import usercache


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))


def _folder(tmp_path: Path, kind: str) -> Path:
    return tmp_path / "oomdoctor" / kind


def test_a_kept_value_reads_back_equal_without_building_it_again() -> None:
    value = {"by_stage": {2: "optimizer", 3: ("optimizer", "params")}, "ok": True, "x": 1.5, "none": None}
    assert usercache.kept("t", [("a", b"1")], lambda: value) == value
    again = usercache.kept("t", [("a", b"1")], lambda: pytest.fail("built again"))
    assert again == value and type(again["by_stage"][3]) is tuple


def test_what_marshal_cannot_hold_or_that_equals_nothing_is_built_each_time(tmp_path: Path) -> None:
    for value in ({"released": datetime.date(2024, 5, 1)}, {"loss": float("nan")}):
        usercache.kept("t", [("a", repr(value).encode())], lambda v=value: v)
    assert not list(_folder(tmp_path, "t").glob("*.marshal"))


def test_a_damaged_or_foreign_entry_is_a_miss(tmp_path: Path) -> None:
    key = usercache.content_key("t", [("a", b"1")])
    assert usercache.write("t", key, [1, 2])
    (entry,) = _folder(tmp_path, "t").glob("*.marshal")
    data = entry.read_bytes()
    for damaged in (data[: len(data) // 2], b"", b"\xfb not marshal"):
        entry.write_bytes(damaged)
        assert usercache.read("t", key) is None
    usercache.write("t", "another-key", [1, 2])
    os.replace(_folder(tmp_path, "t") / "another-key.marshal", entry)  # an entry under the wrong name
    assert usercache.read("t", key) is None


def test_the_key_changes_with_the_interpreter_format(monkeypatch: pytest.MonkeyPatch) -> None:
    key = usercache.content_key("t", [("a", b"1")])
    monkeypatch.setattr(usercache, "_FORMAT", "cpython-399 marshal 9")
    assert usercache.content_key("t", [("a", b"1")]) != key


def test_a_write_keeps_the_newest_entries_of_its_kind_and_drops_the_old_json_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usercache, "KEEP_PER_KIND", 3)
    folder = _folder(tmp_path, "config-v1")
    folder.mkdir(parents=True)
    (folder / "from-an-earlier-version.json").write_text("{}")
    (folder / ".tmp-being-written.marshal").write_bytes(b"")
    later = 4 * 10**18  # the entries before look written later than the next one: it stays all the same
    for n in range(5):
        assert usercache.write("config-v1", f"k{n}", n)
        os.utime(folder / f"k{n}.marshal", ns=(later + n, later + n))
    assert usercache.write("config-v1", "k5", 5)
    names = sorted(p.name for p in folder.iterdir())
    assert names == [".tmp-being-written.marshal", "k3.marshal", "k4.marshal", "k5.marshal"]
    assert [usercache.read("config-v1", k) for k in ("k3", "k4", "k5")] == [3, 4, 5]
    other = _folder(tmp_path, "data-v1")
    assert usercache.write("data-v1", "d", 1) and list(other.iterdir()) == [other / "d.marshal"]
