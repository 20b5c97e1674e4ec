"""``oomdoctor rules check``: validates rule files afresh; a bad file is one line naming file and line, exit 2.
And the parser registers only the verb that runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oomdoctor.cli import VERBS, build_parser, main, verb_from_argv
from oomdoctor.resources import rules_dir


def test_bundled_rules_check_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--lang", "en", "rules", "check", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is True and out["rules"] == len(list(rules_dir().glob("*.yaml")))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_misspelt_fact_path_is_one_line_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lang: str
) -> None:
    folder = tmp_path / "rules"
    shutil.copytree(rules_dir(), folder)
    target = next(p for p in sorted(folder.glob("*.yaml")) if "fact: config.cutoff_len" in p.read_text())
    text = target.read_text()
    target.write_text(text.replace("fact: config.cutoff_len", "fact: config.cutof_len", 1))
    line = text[: text.index("fact: config.cutoff_len")].count("\n") + 1
    assert main(["--lang", lang, "rules", "check", "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{target}:{line}:" in err and "cutof_len" in err


def test_the_verb_is_found_past_the_language_option() -> None:
    assert verb_from_argv(["--lang", "zh", "diagnose", "--config", "x"]) == "diagnose"
    assert verb_from_argv(["diagnose", "--help"]) == "diagnose"
    assert verb_from_argv(["--help", "diagnose"]) is None
    assert verb_from_argv([]) is None
    assert verb_from_argv(["nonsense"]) is None


def test_only_the_running_verb_registers_its_arguments() -> None:
    parser = build_parser("en", verb="estimate")
    sub = next(a for a in parser._actions if a.dest == "verb")
    assert set(sub.choices) == set(VERBS)  # every verb still listed
    estimate_opts = {o for a in sub.choices["estimate"]._actions for o in a.option_strings}
    diagnose_opts = {o for a in sub.choices["diagnose"]._actions for o in a.option_strings}
    assert "--gpu" in estimate_opts
    assert "--log" not in diagnose_opts
