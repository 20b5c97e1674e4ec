"""The one catalogue (oomdoctor/catalogue/{en,zh}.yaml) is complete: the same keys and fields in both languages,
no empty text, every key the code looks up exists, and every key is used."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import oomdoctor
from oomdoctor import catalogue, usercache
from oomdoctor.i18n import MESSAGES, both, msg
from oomdoctor.tui.strings import TEXTS, t

SRC = Path(oomdoctor.__file__).parent

# Keys the code builds from a value (``msg(f"phase_{d.phase}")``): the group, the literal start of the key, and
# where it is built. A call with a computed key whose start is not listed here fails the test below.
DYNAMIC: dict[tuple[str, str], str] = {
    ("core", "phase_"): "report/diagnosis.py, rules/findings.py, commands/trial.py, trial/compare.py",
    ("core", "cause_"): "report/diagnosis.py, commands/trial.py",
    ("core", "f_"): "rules/findings.py: each finding's f_<id> text",
    ("core", "q_"): "rules/questions.py: q_<key> and q_<key>_<value>",
    ("core", "estimate_phase_"): "rules/proposals.py",
    ("core", "term_"): "commands/estimate.py, rules/findings.py: the shared term_<term> names",
    ("core", "est_phase_"): "commands/estimate.py",
    ("core", "fit_h_"): "commands/fit.py: the table head",
    ("core", "milestone_"): "commands/fit.py, commands/trial.py",
    ("core", "milestone_short_"): "trial/compare.py",
    ("core", "trial_outcome_"): "commands/trial.py",
    ("core", "acct_whose_"): "facts/account.py",
    ("core", "log_ctx_"): "facts/log_phase.py",
    ("core", "cmp_memory_"): "trial/compare.py",
    ("core", "wr_limit_"): "watch/render.py",
    ("tui", "key_"): "tui/bindings.py: key_<binding id> and key_<binding id>_tip",
    ("tui", "tab_"): "tui/screens.py",
    ("tui", "phase_"): "tui/render.py",
    ("tui", "cause_"): "tui/render.py",
    ("tui", "term_"): "tui/render.py",
    ("tui", "outcome_"): "tui/render.py, tui/widgets.py",
    ("tui", "trial_phase_"): "tui/trial_screen.py",
    ("tui", "chart_"): "tui/trial_screen.py",
}


def _group_of_call(node: ast.Call, module: Path) -> str | None:
    """Which group a call looks a key up in: ``msg``/``both``/``help_text`` (and log_phase's ``text``) the
    core one, ``t`` the app's; None for any other call."""
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
    if name in ("msg", "both", "help_text") or (name == "text" and module.name == "log_phase.py"):
        return "core"
    if name == "t" and module.parent.name == "tui":
        return "tui"
    return None


def _calls() -> list[tuple[str, ast.expr, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args:
                group = _group_of_call(node, path)
                if group is not None:
                    out.append((group, node.args[0], path))
    return out


def _string_constants() -> set[str]:
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def _prefix(expr: ast.JoinedStr) -> str:
    head = expr.values[0] if expr.values else None
    return head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""


# --- the files ----------------------------------------------------------------------------------------------


def test_the_shipped_catalogue_has_no_problem() -> None:
    assert catalogue.check(catalogue.read_flat()) == []


def test_both_files_hold_the_same_keys_in_the_same_order() -> None:
    flat = catalogue.read_flat()
    assert list(flat["en"]) == list(flat["zh"])


@pytest.mark.parametrize(
    ("zh", "problem"),
    [
        ({"core.a": "找不到 {path}"}, "core.b: no zh text"),
        ({"core.a": "找不到", "core.b": "{n} 行"}, "core.a: en fills ['path'], zh []"),
        ({"core.a": "找不到 {path}", "core.b": "{n} 行", "core.c": "多余"}, "core.c: no en text"),
        ({"core.a": "找不到 {path}", "core.b": "  "}, "core.b: empty zh text"),
    ],
)
def test_the_check_names_each_kind_of_problem(zh: dict[str, str], problem: str) -> None:
    en = {"core.a": "{path} not found", "core.b": "{n} lines"}
    assert problem in catalogue.check({"en": en, "zh": zh})


def test_the_check_refuses_a_zh_only_field_and_a_key_twice() -> None:
    en = {"core.a": "{what} not found", "shared.b": "x", "tui.b": "y"}
    zh = {"core.a": "找不到{what_zh}", "shared.b": "甲", "tui.b": "乙"}
    assert catalogue.check({"en": en, "zh": zh}) == [
        "core.a: en fills ['what'], zh ['what_zh']",
        "tui.b: also in shared",
    ]


def test_a_broken_file_is_named() -> None:
    with pytest.raises(ValueError, match="zh.yaml"):
        catalogue.flatten({"core": {"a": ["not", "a", "text"]}}, "zh.yaml")
    with pytest.raises(ValueError, match="en.yaml"):
        catalogue.flatten({"other": {}}, "en.yaml")


# --- the code that reads it ---------------------------------------------------------------------------------


def test_every_key_the_code_looks_up_exists() -> None:
    missing = [
        f"{path.relative_to(SRC)}: {group} {arg.value!r}"
        for group, arg, path in _calls()
        if isinstance(arg, ast.Constant) and catalogue.lookup(group, arg.value) is None
    ]
    assert missing == []


def test_every_computed_key_is_listed_and_every_listed_start_names_keys() -> None:
    built = {(group, _prefix(arg)) for group, arg, _ in _calls() if isinstance(arg, ast.JoinedStr)}
    assert sorted(built - set(DYNAMIC)) == []
    for group, prefix in DYNAMIC:
        assert any(k.startswith(prefix) for k in catalogue.group_keys(group)), (group, prefix)


def test_every_key_is_used() -> None:
    constants = _string_constants()
    unused = [
        key
        for key in catalogue.texts()
        if (bare := key.partition(".")[2]) not in constants
        and not any(bare.startswith(p) for g, p in DYNAMIC if key.startswith((f"{g}.", "shared.")))
    ]
    assert unused == []


# --- the lookups --------------------------------------------------------------------------------------------


def test_the_lookups_read_the_catalogue() -> None:
    flat = catalogue.read_flat()
    assert msg("log_empty", "zh", path="a.log") == flat["zh"]["core.log_empty"].format(path="a.log")
    assert both("log_empty", path="a.log")["en"] == flat["en"]["core.log_empty"].format(path="a.log")
    assert t("key_quit", "en") == flat["en"]["tui.key_quit"]
    # a shared key answers both; a key kept apart answers each its own text
    assert msg("phase_eval", "en") == t("phase_eval", "en") == flat["en"]["shared.phase_eval"]
    assert msg("phase_save", "zh") == flat["zh"]["core.phase_save"]
    assert t("phase_save", "zh") == flat["zh"]["tui.phase_save"]
    assert "phase_eval" in MESSAGES and "phase_eval" in TEXTS and "key_quit" not in MESSAGES


def test_a_start_reads_the_compiled_entry_and_an_edit_rebuilds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "catalogue"
    folder.mkdir()
    for lang, text in (("en", "core:\n  a: one {n}\n"), ("zh", "core:\n  a: 一 {n}\n")):
        (folder / f"{lang}.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(catalogue, "HERE", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    assert catalogue._load() == {"core.a": {"en": "one {n}", "zh": "一 {n}"}}
    entries = list((usercache.cache_root() / catalogue.KIND).glob("*.marshal"))
    assert len(entries) == 1
    # the next start takes the entry without parsing YAML
    monkeypatch.setattr(catalogue, "parse", lambda data, name: pytest.fail("parsed the YAML again"))
    assert catalogue._load()["core.a"]["zh"] == "一 {n}"
    monkeypatch.undo()
    monkeypatch.setattr(catalogue, "HERE", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (folder / "zh.yaml").write_text("core:\n  a: 壹 {n}\n", encoding="utf-8")
    assert catalogue._load()["core.a"]["zh"] == "壹 {n}"
    assert len(list((usercache.cache_root() / catalogue.KIND).glob("*.marshal"))) == 2


# --- no user-facing Chinese outside the catalogue ------------------------------------------------------------

# Chinese characters and the full-width punctuation Chinese text uses.
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")
# The string literals that may hold such characters, by module and text, each with its reason.
CJK_ALLOWED = {
    ("cli.py", ",。、;:!?)》」』"): "typography, not a text: marks a wrapped help line never starts with",
    ("cli.py", "(《「『"): "typography, not a text: marks a wrapped help line never ends with",
}


def _docstrings(tree: ast.Module) -> set[int]:
    bodies = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    return {
        id(first.value)
        for n in bodies
        if n.body and isinstance(first := n.body[0], ast.Expr) and isinstance(first.value, ast.Constant)
    }


def _cjk_literals() -> list[tuple[str, str]]:
    """Every string literal in src holding a Chinese character, docstrings left out (comments are not in
    the tree); f-strings are seen through their literal parts."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        module = path.relative_to(SRC).as_posix()
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) and id(node) not in docs else None
            if isinstance(text, str) and _CJK.search(text):
                found.append((module, text))
    return found


def test_no_chinese_text_is_left_in_the_code_outside_the_catalogue() -> None:
    assert sorted(set(_cjk_literals()) - set(CJK_ALLOWED)) == []


def test_the_scan_finds_chinese_literals_and_every_allowed_one_is_still_there() -> None:
    assert set(CJK_ALLOWED) <= set(_cjk_literals())  # an allowance no longer needed is removed
    tree = ast.parse('"""说明"""\nx = "显存"\ny = f"{x}溢出"\n# 注释\n')
    literals = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in _docstrings(tree)
    ]
    assert [s for s in literals if _CJK.search(s)] == ["显存", "溢出"]
