"""``oomdoctor rules check [--dir DIR] [--json]``: validate decision-node files afresh, for people who edit them.

A start reads the rules from the user cache once they have been validated; this verb always validates (the
pydantic schema, fact paths, placeholders, questions, ids and ``next`` links) and never writes the cache. A
problem is one line naming the file and the line, and exit 2.
"""

from __future__ import annotations

import argparse
import json

from oomdoctor.errors import EXIT_OK
from oomdoctor.i18n import help_text, msg


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=["check"],
        help=help_text("help_rules_action"),
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help=help_text("help_rules_dir"),
    )
    parser.add_argument("--json", action="store_true", help=help_text("help_rules_json"))


def run(args: argparse.Namespace) -> int:
    from oomdoctor.rules.loader import check_rules

    ruleset = check_rules(args.dir)
    if args.json:
        print(json.dumps({"valid": True, "directory": str(ruleset.directory), "rules": len(ruleset)}))
    else:
        print(msg("rules_valid", args.lang, count=len(ruleset), directory=ruleset.directory))
    return EXIT_OK
