"""Bundled data files: parsed from YAML once, then read from the user cache copy, unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor import datafiles, usercache

PACKAGE = Path(datafiles.__file__).resolve().parent
DATA_FILES = sorted(PACKAGE.rglob("*.yaml"))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))


@pytest.mark.parametrize("path", DATA_FILES, ids=lambda p: p.name)
def test_the_cached_copy_reads_back_as_the_yaml_does(path: Path, tmp_path: Path) -> None:
    parsed = datafiles.load_yaml_text(path.read_text(encoding="utf-8"))
    first = datafiles.load_data_file(path)  # parses and keeps a copy
    assert list((tmp_path / "oomdoctor" / "data-v1").glob("*.marshal")), "nothing was kept"
    again = datafiles.load_data_file(path)  # from the copy
    assert first == again == parsed


def test_integer_keys_survive_the_cached_copy(tmp_path: Path) -> None:
    source = tmp_path / "table.yaml"
    source.write_text("by_stage:\n  2: optimizer\n  3: [optimizer, params]\nname: x\n")
    datafiles.load_data_file(source)
    assert datafiles.load_data_file(source) == {
        "by_stage": {2: "optimizer", 3: ["optimizer", "params"]},
        "name": "x",
    }


def test_what_the_cache_cannot_hold_is_never_cached(tmp_path: Path) -> None:
    source = tmp_path / "dated.yaml"
    source.write_text("released: 2024-05-01\n")
    assert str(datafiles.load_data_file(source)["released"]) == "2024-05-01"
    assert not list((tmp_path / "oomdoctor" / "data-v1").glob("*.marshal"))


def test_an_edited_file_is_parsed_again(tmp_path: Path) -> None:
    source = tmp_path / "table.yaml"
    source.write_text("a: 1\n")
    assert datafiles.load_data_file(source) == {"a": 1}
    source.write_text("a: 2\n")
    assert datafiles.load_data_file(source) == {"a": 2}


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    source = tmp_path / "table.yaml"
    source.write_text("a: 1\n")
    datafiles.load_data_file(source)
    for entry in (tmp_path / "oomdoctor" / "data-v1").glob("*.marshal"):
        entry.write_bytes(b"\xfb not marshal")
    assert datafiles.load_data_file(source) == {"a": 1}
    assert usercache.read("data-v1", "no-such-key") is None
