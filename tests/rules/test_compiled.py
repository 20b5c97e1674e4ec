"""The rules as a start reads them: validated once with pydantic, then rebuilt from the user cache.

The cached form must be the validated form exactly (same nodes, same diagnosis), must be rebuilt when a rule
file or the validating code changes, and must never turn a damaged or unwritable cache into an error.
"""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oomdoctor import records, usercache
from oomdoctor.resources import rules_dir
from oomdoctor.rules import compiled, model, nodes
from oomdoctor.rules.loader import RuleLoadError, check_rules, load_rules

ROOT = Path(__file__).resolve().parents[2]
TWINS = [
    (model.LocalText, nodes.LocalText),
    (model.Condition, nodes.Condition),
    (model.ChangeOp, nodes.ChangeOp),
    (model.AnswerOption, nodes.AnswerOption),
    (model.Ask, nodes.Ask),
    (model.CauseFromFact, nodes.CauseFromFact),
    (model.Locates, nodes.Locates),
    (model.Guard, nodes.Guard),
    (model.Requirement, nodes.Requirement),
    (model.RuleNode, nodes.RuleNode),
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "oomdoctor" / compiled.KIND


@pytest.fixture
def rules_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "rules"
    shutil.copytree(rules_dir(), folder)
    return folder


@pytest.mark.parametrize(("schema", "runtime"), TWINS, ids=lambda c: c.__name__)
def test_each_runtime_class_has_exactly_its_schema_twins_fields(schema: type, runtime: type) -> None:
    assert set(schema.model_fields) == {f.name for f in records.fields(runtime)}


def test_cached_nodes_equal_the_validated_nodes(cache: Path, rules_copy: Path) -> None:
    fresh = check_rules(rules_copy)
    assert not cache.exists()  # checking never writes the cache
    first = load_rules(rules_copy)  # validates and writes the entry
    (entry,) = cache.glob("*.marshal")
    from oomdoctor.rules import loader

    loader._CACHE.clear()
    again = load_rules(rules_copy)  # from the entry
    assert [n.node for n in again] == [n.node for n in first] == [n.node for n in fresh]
    assert [(n.file, n.line) for n in again] == [(n.file, n.line) for n in fresh]
    assert all(n.root is None for n in again) and all(n.root is not None for n in fresh)
    assert (
        len(usercache.read(compiled.KIND, entry.stem)) == len(fresh) == len(list(rules_copy.glob("*.yaml")))
    )


def test_an_edited_rule_file_is_validated_again(cache: Path, rules_copy: Path) -> None:
    load_rules(rules_copy)
    target = sorted(rules_copy.glob("*.yaml"))[0]
    target.write_text(target.read_text().replace("  en:", "  en_typo:", 1))
    with pytest.raises(RuleLoadError, match=target.name):
        load_rules(rules_copy)  # a new key: the broken file is validated, not read from the old entry


def test_a_damaged_entry_is_a_miss_and_is_rewritten(cache: Path, rules_copy: Path) -> None:
    load_rules(rules_copy)
    (entry,) = cache.glob("*.marshal")
    entry.write_bytes(marshal.dumps((entry.stem, [{"file": 1}])))
    from oomdoctor.rules import loader

    loader._CACHE.clear()
    assert len(load_rules(rules_copy)) == len(check_rules(rules_copy))
    assert usercache.read(compiled.KIND, entry.stem)[0]["node"]["id"]


def test_an_unwritable_cache_is_simply_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    from oomdoctor.rules import loader

    loader._CACHE.clear()
    assert len(load_rules()) == len(check_rules())
    assert usercache.read(compiled.KIND, "anything") is None


def test_the_key_follows_contents_and_the_validating_code(
    rules_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(rules_copy.glob("*.yaml"))
    key = compiled.digest(files)
    assert compiled.digest(files) == key
    files[0].write_text(files[0].read_text() + "\n")
    edited = compiled.digest(files)
    assert edited != key
    monkeypatch.setattr(compiled, "_VALIDATING_CODE", ("rules",))  # as if the facts package had changed
    assert compiled.digest(files) != edited


def _diagnose_json(cache: Path, *extra: str) -> tuple[dict, list[str]]:
    code = (
        "import json, runpy, sys\n"
        "sys.argv = ['oomdoctor', 'diagnose', '--config', sys.argv[1], '--log', sys.argv[2], '--json']\n"
        "try:\n    runpy.run_module('oomdoctor.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('MODULES=' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})) + '\\n')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "configs/keywords_clean_train.yaml"), str(ROOT / "configs/demo/train.log")],
        capture_output=True, text=True, check=False, env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )  # fmt: skip
    modules = next(line[8:] for line in out.stderr.splitlines() if line.startswith("MODULES="))
    return json.loads(out.stdout), json.loads(modules)


def test_a_warm_start_diagnoses_the_same_without_pydantic(tmp_path: Path) -> None:
    cold, cold_modules = _diagnose_json(tmp_path)
    warm, warm_modules = _diagnose_json(tmp_path)
    assert warm == cold
    assert "pydantic" in cold_modules  # the first start validated the rule files
    assert "pydantic" not in warm_modules
