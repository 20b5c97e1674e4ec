"""The command line as a shell user meets it: pipes, bad arguments, exit codes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from oomdoctor.cli import main


def test_a_closed_pipe_ends_quietly() -> None:
    """`oomdoctor diagnose ... | head -1` must not print a BrokenPipeError traceback."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cmd = (
        f"{sys.executable} -m oomdoctor.cli diagnose --config {root}/configs/keywords_clean_train.yaml"
        f" --log {root}/configs/demo/train.log | head -c 10"
    )
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    assert len(out.stdout) == 10
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr


def test_bad_arguments_are_one_line_and_exit_2(capsys) -> None:
    try:
        code = main(["diagnose", "--longest-tokens", "zero"])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("oomdoctor:")


def test_bilingual_errors_stay_one_line_and_split_by_language() -> None:
    from oomdoctor.errors import BadInput
    from oomdoctor.i18n import in_lang, msg

    err = BadInput(msg("log_empty", None, path="x.log"))
    assert str(err) == "x.log is empty / x.log 是空文件"
    assert in_lang(err, "en") == "x.log is empty" and in_lang(err, "zh") == "x.log 是空文件"
    assert in_lang(BadInput("plain"), "zh") == "plain"


# --- `--help` in the user's language ------------------------------------------------------------------

LANG_ENV = ("OOMDOCTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG")


def _help_of(argv: list[str], capsys) -> str:
    try:
        main(argv)
    except SystemExit as exit_:
        assert exit_.code == 0
    else:  # pragma: no cover - argparse always exits after --help
        raise AssertionError("--help did not exit")
    return capsys.readouterr().out


@pytest.fixture
def env_lang(monkeypatch):
    """Set the environment's language alone (LANG), whatever the machine running the tests has."""

    def set_lang(value: str | None) -> None:
        for key in LANG_ENV:
            monkeypatch.delenv(key, raising=False)
        if value is not None:
            monkeypatch.setenv("LANG", value)

    return set_lang


@pytest.mark.parametrize(
    "argv", [["--lang", "zh", "diagnose", "--help"], ["diagnose", "--lang=zh", "--help"]]
)
def test_lang_zh_before_or_after_the_verb_gives_chinese_help(argv, capsys, env_lang) -> None:
    env_lang("en_US.UTF-8")
    out = _help_of(argv, capsys)
    assert "根据配置和日志定位显存溢出,并给出一项修改" in out
    assert "把诊断结果输出为一个 JSON 对象" in out
    assert "回答诊断提出的问题" in out  # the shared run inputs (_inputs.py) follow too
    assert "print the diagnosis as one JSON object" not in out
    assert "usage: oomdoctor diagnose" in out  # argparse's own words stay as argparse prints them


def test_lang_en_overrides_a_chinese_environment(capsys, env_lang) -> None:
    env_lang("zh_CN.UTF-8")
    out = _help_of(["--lang", "en", "estimate", "--help"], capsys)
    assert "Estimate peak GPU memory per term and phase" in out
    assert "the card's memory in MiB" in out
    assert not any("\u4e00" <= c <= "\u9fff" for c in out)


def test_chinese_lang_variable_gives_chinese_top_level_help() -> None:
    """The real entry point, as a user types it: LANG=zh_CN.UTF-8 oomdoctor --help."""
    env = {k: v for k, v in os.environ.items() if k not in LANG_ENV}
    out = subprocess.run(
        [sys.executable, "-m", "oomdoctor.cli", "--help"],
        capture_output=True,
        text=True,
        env={**env, "LANG": "zh_CN.UTF-8"},
    )
    assert out.returncode == 0, out.stderr
    assert "诊断 LLaMA-Factory 训练中的 CUDA 显存溢出。" in out.stdout
    for verb_zh in ("短时试跑并记录显存采样", "按分项与阶段估算显存峰值", "对比多次试跑(或两份配置)"):
        assert verb_zh in out.stdout
    english = subprocess.run(
        [sys.executable, "-m", "oomdoctor.cli", "--help"],
        capture_output=True,
        text=True,
        env={**env, "LANG": "C.UTF-8"},
    )
    assert english.returncode == 0
    assert "Diagnose CUDA out-of-memory in LLaMA-Factory runs." in english.stdout
    assert "诊断" not in english.stdout


@pytest.mark.parametrize(
    ("argv", "environment", "expected"),
    [
        (["diagnose", "--lang", "zh"], "en_US.UTF-8", "zh"),
        (["--lang=en", "trial"], "zh_CN.UTF-8", "en"),
        (["--lang", "zh", "watch", "--lang", "en"], None, "en"),  # the last one wins, as argparse's does
        (
            ["--lang", "fr", "watch"],
            "zh_CN.UTF-8",
            "zh",
        ),  # argparse rejects fr; its message is English or not
        (["trial", "--", "--lang", "zh"], None, "en"),
        (["--lang"], "zh_TW.UTF-8", "zh"),
    ],
)
def test_help_language_is_read_from_argv_then_environment(argv, environment, expected, env_lang) -> None:
    from oomdoctor.cli import lang_from_argv

    env_lang(environment)
    assert lang_from_argv(argv) == expected


def _cjk(text: str) -> bool:
    return any("\u4e00" <= c <= "\u9fff" for c in text)


def _helps(parser: argparse.ArgumentParser, where: str = "oomdoctor") -> dict[str, str | None]:
    """Every text this parser and its verbs' parsers show, keyed by where it is shown (argparse's own
    -h/--help line left out: it is argparse's wording, the same in both languages)."""
    texts: dict[str, str | None] = {f"{where} description": parser.description}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                texts[f"{where} {choice.dest} (verb list)"] = choice.help
            for verb, sub in action.choices.items():
                texts.update(_helps(sub, f"{where} {verb}"))
            continue
        texts[f"{where} {'/'.join(action.option_strings) or action.dest}"] = action.help
    return texts


def test_every_help_text_exists_in_both_languages_and_they_differ(env_lang) -> None:
    from oomdoctor.cli import VERBS, build_parser

    english, chinese = _helps(build_parser("en")), _helps(build_parser("zh"))
    assert english.keys() == chinese.keys()
    assert len(english) > 40 and all(f"oomdoctor {verb} (verb list)" in english for verb in VERBS)
    for where, en in english.items():
        zh = chinese[where]
        assert en and en.strip(), f"{where}: English help is empty"
        assert zh and zh.strip(), f"{where}: Chinese help is empty"
        assert en != zh, f"{where}: the same text in both languages: {en!r}"
        assert not _cjk(en), f"{where}: the English help holds Chinese: {en!r}"
        assert _cjk(zh), f"{where}: the Chinese help holds no Chinese: {zh!r}"
    # Without an argument the parser speaks the environment's language, as `oomdoctor` does.
    env_lang("zh_CN.UTF-8")
    assert _cjk(build_parser().description or "")
    env_lang(None)
    assert not _cjk(build_parser().description or "")


@pytest.mark.parametrize(
    "verb", ["diagnose", "patch", "estimate", "lengths", "trial", "watch", "compare", "tui"]
)
def test_chinese_help_fits_the_terminal_width(verb, capsys, monkeypatch) -> None:
    """A Chinese character takes two columns: help lines are wrapped by columns, not characters."""
    from oomdoctor.cli import _columns

    monkeypatch.setenv("COLUMNS", "60")
    out = _help_of(["--lang", "zh", verb, "--help"], capsys)
    assert _cjk(out)
    too_wide = [line for line in out.splitlines() if _columns(line) > 60]
    assert not too_wide, too_wide


def test_wrap_columns_breaks_chinese_between_characters_not_before_closing_marks() -> None:
    from oomdoctor.cli import _columns, wrap_columns

    text = "统计按这个截断长度 cutoff_len 会被截断的样本数(默认取配置中的值),再看验证集"
    for width in range(12, 60):  # from the widest word (cutoff_len) up
        lines = wrap_columns(text, width)
        assert all(_columns(line) <= width for line in lines), (width, lines)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert not any(line[0] in ",。)" or line[-1] == "(" for line in lines), (width, lines)
    assert wrap_columns("print one JSON object", 10) == ["print one", "JSON", "object"]
    assert wrap_columns("a " + "x" * 20, 10) == ["a", "x" * 20]  # a word wider than the line keeps it whole


def test_at_exit_the_objects_are_frozen_so_the_last_collection_walks_none() -> None:
    """However often ``main`` runs in a process, one exit hook freezes the heap (the interpreter's final
    collection then skips it); the verb's output is written before that."""
    code = (
        "import atexit, contextlib, gc, io\n"
        "calls, freeze = [], gc.freeze\n"
        "gc.freeze = lambda: (calls.append(1), freeze())\n"
        "from oomdoctor.cli import main\n"
        "for _ in range(3):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main(['--help'])\n"
        "atexit._run_exitfuncs()\n"
        "print(len(calls), gc.get_freeze_count() > 1000)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "True"], out.stderr
