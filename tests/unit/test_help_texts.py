"""The command line's help, now read from the catalogue (``help_*`` keys), prints exactly what it printed when
the texts were inline in ``cli.py`` and ``commands/*``: every verb's ``--help`` and the top-level one, in
English and Chinese, at a wide and a narrow terminal (the narrow one exercises the Chinese line wrapping).
The reference, ``tests/cases/help_output.json``, was captured from main before the move."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from oomdoctor import cli
from oomdoctor.i18n import MESSAGES

CASES = Path(__file__).resolve().parents[1] / "cases" / "help_output.json"
BEFORE = {k: v for k, v in json.loads(CASES.read_text(encoding="utf-8")).items() if not k.startswith("_")}


def _cases() -> set[str]:
    return {f"{c} {lang} {v}" for c in ("100", "52") for lang in ("en", "zh") for v in ["-", *cli.VERBS]}


def _printed(lang: str, verb: str) -> str:
    argv = ([] if verb == "-" else [verb]) + ["--help", "--lang", lang]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.main(argv)
    return out.getvalue()


def _help(columns: str, lang: str, verb: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", columns)
    return _printed(lang, verb)


def test_the_reference_covers_every_verb_in_both_languages() -> None:
    assert set(BEFORE) == _cases()


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_help_reads_as_before(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    columns, lang, verb = case.split()
    assert _help(columns, lang, verb, monkeypatch) == BEFORE[case]


def test_every_verb_summary_is_a_help_key_of_the_catalogue() -> None:
    assert all(key.startswith("help_") and key in MESSAGES for key in cli.VERBS.values())


def test_the_help_texts_are_kept_apart_and_read_back_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomdoctor import catalogue

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(catalogue, "_help", None)
    first = catalogue.help_entry("help_main_lang")
    assert first == MESSAGES["help_main_lang"]
    (entry,) = (tmp_path / "oomdoctor" / catalogue.HELP_KIND).glob("*.marshal")

    def no_build() -> dict:
        raise AssertionError("built again")

    monkeypatch.setattr(catalogue, "_help", None)
    monkeypatch.setattr(catalogue, "texts", no_build)
    assert catalogue.help_entry("help_main_lang") == first
    entry.write_bytes(b"\x00damaged")  # a damaged entry is a miss: built again
    monkeypatch.setattr(catalogue, "_help", None)
    with pytest.raises(AssertionError, match="built again"):
        catalogue.help_entry("help_main_lang")


if (
    __name__ == "__main__"
):  # after a deliberate help change: PYTHONPATH=src python tests/unit/test_help_texts.py
    import os

    notes = {k: v for k, v in json.loads(CASES.read_text(encoding="utf-8")).items() if k.startswith("_")}
    found = {}
    for case in sorted(_cases()):
        columns, lang, verb = case.split()
        os.environ["COLUMNS"] = columns
        found[case] = _printed(lang, verb)
    CASES.write_text(json.dumps({**notes, **found}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
