"""The `oomdoctor` command: with no verb it opens the TUI; each verb also works headless with --json.

Each verb lives in ``oomdoctor.commands.<verb>`` with ``register(subparsers)`` and ``run(args) -> int``.
Modules are imported only for the verb that runs, so start-up stays light.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any

from oomdoctor import __version__
from oomdoctor.errors import EXIT_BAD_INPUT, BadInput, one_line
from oomdoctor.i18n import LANGS, Lang, default_lang, help_text, msg, set_help_lang
from oomdoctor.lazyre import keep_new_forms, lazy

# Each verb and the catalogue key of its one-line help; ``--help`` shows the user's language.
VERBS: dict[str, str] = {
    "demo": "help_verb_demo",
    "diagnose": "help_verb_diagnose",
    "patch": "help_verb_patch",
    "estimate": "help_verb_estimate",
    "lengths": "help_verb_lengths",
    "trial": "help_verb_trial",
    "fit": "help_verb_fit",
    "watch": "help_verb_watch",
    "compare": "help_verb_compare",
    "tui": "help_verb_tui",
    "rules": "help_verb_rules",
}


# A Chinese character takes two terminal columns, and Chinese puts no spaces between words: argparse's
# textwrap would count each as one column and leave whole clauses unbroken.
_WIDE_OR_WORD = lazy(
    r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+|\s+"
)
_NO_LINE_START = set(",。、;:!?)》」』")
_NO_LINE_END = set("(《「『")


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap_columns(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` terminal columns, breaking between words or Chinese characters
    (never before a closing mark or after an opening one); a word longer than ``width`` keeps its own line."""
    pieces: list[str] = []
    for piece in _WIDE_OR_WORD.findall(" ".join(text.split())):
        if (
            pieces
            and not pieces[-1].isspace()
            and (piece[0] in _NO_LINE_START or pieces[-1][-1] in _NO_LINE_END)
        ):
            pieces[-1] += piece
        else:
            pieces.append(piece)
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if piece.isspace():
            line += " " if line else ""
        elif line and _columns(line) + _columns(piece) > width:
            lines.append(line.rstrip())
            line = piece
        else:
            line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` (``$COLUMNS``, else the terminal's, else 80), without importing
    shutil: argparse would, and with it the archive modules shutil loads, on every start."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, wrapped by terminal columns so Chinese help lines fit the terminal."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        width = _terminal_columns() - 2 if width is None else width  # as argparse sizes it
        super().__init__(prog, indent_increment, max_help_position, width)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap_columns(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line for line in wrap_columns(text, width - len(indent)))


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line instead of a usage dump on bad arguments, and wraps help texts
    by terminal columns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"oomdoctor: {one_line(message)}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def lang_from_argv(argv: Sequence[str]) -> Lang:
    """The language asked for on the command line (the last ``--lang X`` / ``--lang=X``, before or after the
    verb), else the environment's: the help texts are fixed when the parser is built, before it parses."""
    asked: str | None = None
    for i, word in enumerate(argv):
        if word == "--":
            break
        if word == "--lang" and i + 1 < len(argv):
            asked = argv[i + 1]
        elif word.startswith("--lang="):
            asked = word.split("=", 1)[1]
    return asked if asked in LANGS else default_lang()


def _debug_help() -> str:
    return help_text("help_main_debug")


def _lang_help() -> str:
    return help_text("help_main_lang")


def verb_from_argv(argv: Sequence[str]) -> str | None:
    """The verb the command line names, when its first word that is no option is one (``--lang X`` skipped);
    None for ``oomdoctor``, ``oomdoctor --help`` or a word that is no verb (argparse then says so)."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help", "--version", "--"):
            return None
        if word == "--lang":
            next(words, None)
        elif not word.startswith("-"):
            return word if word in VERBS else None
    return None


def build_parser(
    lang: Lang | None = None, *, verb: str | None = None, verbs_only: bool = False, alone: bool = False
) -> argparse.ArgumentParser:
    """The command line, its help texts in ``lang`` (None: the environment's, as ``oomdoctor`` without
    --lang). With ``verb``, only that verb's arguments are registered (every verb still has its entry), so
    a command imports just the one module it runs; with ``alone`` too, the other verbs have no entry either
    (a command line that names its verb: only the top-level help and its errors list the verbs); with
    ``verbs_only``, no verb's arguments are registered (the top-level help, ``--version``, the app opened
    without a verb: each reads only the verb list)."""
    set_help_lang(lang or default_lang())
    parser = _Parser(
        prog="oomdoctor",
        description=help_text("help_main_description"),
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"oomdoctor {__version__}",
        help=help_text("help_main_version"),
    )
    parser.add_argument("--lang", choices=list(LANGS), default=None, help=_lang_help())
    parser.add_argument("--debug", action="store_true", default=False, help=_debug_help())
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    for name, key in VERBS.items():
        if alone and name != verb:
            continue
        summary = help_text(key)
        p = sub.add_parser(name, help=summary, description=summary)
        p.add_argument("--lang", choices=list(LANGS), default=argparse.SUPPRESS, help=_lang_help())
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_debug_help())
        if not verbs_only and (verb is None or name == verb):
            importlib.import_module(f"oomdoctor.commands.{name}").register(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb. Exit 0 ok, 1 the diagnosed run or trial failed, 2 bad input or an internal error: an
    unexpected exception is one line on stderr (``--debug`` shows its traceback), never a 1 that a script
    would read as "the training failed"."""
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words[: words.index("--")] if "--" in words else "--debug" in words
    _quick_exit()
    try:
        return _run(words)
    except BadInput as err:
        sys.stderr.write(f"oomdoctor: {one_line(err)}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `oomdoctor diagnose | head`: the reader left; stop quietly, as other command-line tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as err:
        if debug:
            raise
        sys.stderr.write(f"oomdoctor: {one_line(crash_line(err))}\n")
        return EXIT_BAD_INPUT
    finally:
        keep_new_forms()  # the log patterns this start compiled, for the next one (lazyre)


def _quick_exit() -> None:
    """When the process exits, move every object to the collector's permanent generation first: the
    interpreter's last full collection then has nothing to walk (about 6 ms of a ``diagnose`` start,
    a tenth of a warm start). The memory goes back with the process, and what oomdoctor writes it
    closes itself (``with``). Registered once however often ``main`` runs in one process (the tests)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


def crash_line(err: BaseException) -> str:
    """One line for an unexpected exception: its kind, the start of its message, the --debug pointer."""
    try:
        detail = str(err).split("\n", 1)[0]
    except Exception:  # a str() that itself fails (a huge int in the message)
        detail = ""
    return msg("crash", None, kind=type(err).__name__, detail=one_line(detail)[:160] or "-")


def _run(words: list[str]) -> int:
    verb = verb_from_argv(words)
    parser = build_parser(lang_from_argv(words), verb=verb, verbs_only=verb is None, alone=verb is not None)
    args = parser.parse_args(words)
    if args.lang is None:
        args.lang = default_lang()
    module = importlib.import_module(f"oomdoctor.commands.{args.verb or 'tui'}")
    return int(module.run(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
