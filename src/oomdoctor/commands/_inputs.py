"""Arguments that several verbs share: what the run was (config, log), what the user knows that the files
do not say (answers, the card, the real sample lengths), and argparse types for them.

``diagnose``, ``patch`` and ``tui`` read a run the same way, so they register the same arguments here and
hand ``gather_kwargs(args)`` to ``oomdoctor.api``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from oomdoctor.errors import one_line
from oomdoctor.i18n import help_text, msg
from oomdoctor.report import units

# Sane upper bounds for numbers typed on the command line: past them a value is a typo (or hostile), and a
# loop over it (sampling every 1e-300 s, a 1e309 MiB card) would hang or overflow.
MAX_TOKENS = 1 << 30
MAX_GPU_MIB = 10_000_000.0  # 10 TB of card memory


def _parse_int(text: str) -> int | None:
    word = text.strip()
    if not word or len(word) > 20:  # also keeps int() away from Python's 4,300-digit limit
        return None
    try:
        return int(word)
    except ValueError:
        return None


def _parse_float(text: str) -> float | None:
    word = text.strip()
    if not word or len(word) > 40:
        return None
    try:
        value = float(word)
    except ValueError:
        return None
    return value if math.isfinite(value) else None  # nan, inf, 1e309


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[low, high]``."""

    def parse(text: str) -> int:
        value = _parse_int(text)
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                msg(
                    "arg_int_range",
                    None,
                    low=units.number(low),
                    high=units.number(high),
                    value=one_line(text),
                )
            )
        return value

    parse.__name__ = "whole number"
    return parse


def number_in(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def parse(text: str) -> float:
        value = _parse_float(text)
        below = value is None or value < low or (low_open and value <= low)
        if below or value is None or value > high:
            shown_low = f"{low:g}" + (" (exclusive)" if low_open else "")
            raise argparse.ArgumentTypeError(
                msg("arg_range", None, low=shown_low, high=f"{high:g}", value=one_line(text))
            )
        return value

    parse.__name__ = "number"
    return parse


def positive_int(text: str) -> int:
    value = _parse_int(text)
    if value is None or not 1 <= value <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(msg("arg_positive_int", None, value=one_line(text)))
    return value


def positive_number(text: str) -> float:
    value = _parse_float(text)
    if value is None or value <= 0 or value > MAX_GPU_MIB:
        raise argparse.ArgumentTypeError(msg("arg_positive_number", None, value=one_line(text)))
    return value


def add_run_inputs(parser: argparse.ArgumentParser, *, config_required: bool = False) -> None:
    """--config/--log and the facts a user may add: --answer, --gpu-mib, --longest-tokens, --lengths."""
    parser.add_argument(
        "--config",
        required=config_required,
        help=help_text("help_run_config"),
    )
    parser.add_argument(
        "--log",
        help=help_text("help_run_log"),
    )
    add_known_facts(parser)


def add_known_facts(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=help_text("help_run_answer"),
    )
    parser.add_argument(
        "--gpu-mib",
        type=positive_number,
        metavar="N",
        help=help_text("help_run_gpu_mib"),
    )
    add_lengths(parser)


def add_lengths(parser: argparse.ArgumentParser) -> None:
    """The real sample lengths, typed in or from a saved `oomdoctor lengths --json`."""
    parser.add_argument(
        "--longest-tokens",
        type=positive_int,
        metavar="N",
        help=help_text("help_run_longest_tokens"),
    )
    parser.add_argument(
        "--eval-longest-tokens",
        type=positive_int,
        metavar="N",
        help=help_text("help_run_eval_longest_tokens"),
    )
    parser.add_argument(
        "--lengths",
        metavar="FILE",
        help=help_text("help_run_lengths"),
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help=help_text("help_run_json"))


def gather_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for ``oomdoctor.api.gather`` / ``run_diagnosis`` from the shared arguments."""
    from oomdoctor.api import parse_answers

    return {
        "answers": parse_answers(getattr(args, "answer", None)),
        "capacity_mib": getattr(args, "gpu_mib", None),
        "longest_tokens": getattr(args, "longest_tokens", None),
        "eval_longest_tokens": getattr(args, "eval_longest_tokens", None),
        "lengths_file": getattr(args, "lengths", None),
    }


def known_fact_words(args: argparse.Namespace) -> list[str]:
    """The shared arguments as command-line words, to print a follow-up command (``oomdoctor patch ...``)
    that sees exactly the facts this one saw."""
    words: list[str] = []
    for pair in getattr(args, "answer", None) or []:
        words += ["--answer", pair]
    for flag, name in (
        ("--gpu-mib", "gpu_mib"),
        ("--longest-tokens", "longest_tokens"),
        ("--eval-longest-tokens", "eval_longest_tokens"),
        ("--lengths", "lengths"),
    ):
        value = getattr(args, name, None)
        if value is not None:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return words
