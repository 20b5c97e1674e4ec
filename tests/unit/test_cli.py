"""The command line as a shell user meets it: pipes, bad arguments, exit codes."""

from __future__ import annotations

import subprocess
import sys

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
