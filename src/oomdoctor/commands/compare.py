"""``oomdoctor compare``: trial folders side by side (the course's table), or two configs reviewed field by
field (``oomdoctor compare OLD.yaml NEW.yaml``). Reads only; exit 0, or 2 for bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from oomdoctor.commands._inputs import add_json
from oomdoctor.errors import EXIT_OK, BadInput
from oomdoctor.i18n import help_text, msg

YAML_SUFFIXES = (".yaml", ".yml")


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help=help_text("help_compare_paths"),
    )
    add_json(parser)


def _is_config(path: str) -> bool:
    return Path(path).suffix.lower() in YAML_SUFFIXES and not Path(path).is_dir()


def run(args: argparse.Namespace) -> int:
    from oomdoctor.trial.compare import compare_configs, compare_trials

    configs = [p for p in args.paths if _is_config(p)]
    if configs:
        if len(configs) != len(args.paths) or len(configs) != 2:
            raise BadInput(msg("cmp_mixed_args", None))
        review = compare_configs(configs[0], configs[1])
        print(
            json.dumps(review.to_json(), ensure_ascii=False, indent=2)
            if args.json
            else review.render(args.lang)
        )
        return EXIT_OK
    comparison = compare_trials([Path(p) for p in args.paths])
    print(
        json.dumps(comparison.to_json(), ensure_ascii=False, indent=2)
        if args.json
        else comparison.render(args.lang)
    )
    return EXIT_OK
