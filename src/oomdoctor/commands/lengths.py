"""``oomdoctor lengths``: real token lengths of the configured dataset, and what cutoff_len would cut.

Tokenizes through LLaMA-Factory's own loader and template (needs the train extra and the tokenizer on
this machine). Progress goes to stderr as one updating line; the result to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, TextIO

from oomdoctor.commands._inputs import add_json, positive_int
from oomdoctor.errors import EXIT_OK
from oomdoctor.i18n import Lang, help_text, msg
from oomdoctor.report import units

if TYPE_CHECKING:
    from oomdoctor.facts.types import DataFacts


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        required=True,
        help=help_text("help_lengths_config"),
    )
    parser.add_argument(
        "--cutoff",
        type=positive_int,
        metavar="N",
        help=help_text("help_lengths_cutoff"),
    )
    add_json(parser)


class ProgressLine:
    """Rewrites one stderr line at most every ``interval_s`` (always the first and the last update)."""

    def __init__(self, lang: Lang, stream: TextIO | None = None, interval_s: float = 0.5) -> None:
        self.lang = lang
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        self._last: float | None = None
        self._shown = False

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        final = total is not None and done >= total
        if not final and self._last is not None and now - self._last < self.interval_s:
            return
        self._last = now
        self.stream.write(
            "\r"
            + msg(
                "len_progress",
                self.lang,
                done=units.number(done),
                total=units.number(total or None, missing="?"),
            )
        )
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.dataset import token_lengths
    from oomdoctor.facts.types import to_jsonable

    config = read_config(args.config)
    line = ProgressLine(args.lang)
    try:
        data = token_lengths(config, cutoff_len=args.cutoff, progress=line)
    finally:
        line.close()
    if args.json:
        print(json.dumps(to_jsonable(data), ensure_ascii=False, indent=2))
    else:
        print(
            report(
                data,
                config_path=args.config,
                datasets=",".join(config.dataset),
                template=config.template,
                lang=args.lang,
            )
        )
    return EXIT_OK


def report(data: DataFacts, *, config_path: str, datasets: str, template: str | None, lang: Lang) -> str:
    """The lengths as text a person reads in a terminal."""

    n = units.number
    out = [
        msg("len_header", lang, datasets=datasets, template=template or "?"),
        "  "
        + msg(
            "len_train",
            lang,
            samples=n(data.samples),
            max=n(data.max_tokens),
            p50=n(data.p50_tokens),
            p95=n(data.p95_tokens),
            p99=n(data.p99_tokens),
        ),
    ]
    if data.eval_samples is not None:
        out.append("  " + msg("len_eval", lang, samples=n(data.eval_samples), max=n(data.eval_max_tokens)))
    out.append("  " + msg("len_truncated", lang, cutoff=n(data.cutoff_len), truncated=n(data.truncated)))
    if data.max_tokens and data.cutoff_len and data.max_tokens < data.cutoff_len:
        padded = -(-data.max_tokens // 8) * 8
        out.append("  " + msg("len_padded", lang, padded=n(padded), max=n(data.max_tokens)))
    if data.max_tokens:
        eval_part = f" --eval-longest-tokens {data.eval_max_tokens}" if data.eval_max_tokens else ""
        out += [
            "",
            msg(
                "len_next",
                lang,
                config=config_path,
                max=min(data.max_tokens, data.cutoff_len or data.max_tokens),
                eval_part=eval_part,
            ),
        ]
    return "\n".join(out)
