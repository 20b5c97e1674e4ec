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
        help=help_text("check: validate every rule file", "check:校验每个规则文件"),
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help=help_text(
            "the folder of rule files (default: the bundled rules)", "规则文件所在目录(默认:内置规则)"
        ),
    )
    parser.add_argument(
        "--json", action="store_true", help=help_text("print one JSON object", "输出一个 JSON 对象")
    )


def run(args: argparse.Namespace) -> int:
    from oomdoctor.rules.loader import check_rules

    ruleset = check_rules(args.dir)
    if args.json:
        print(json.dumps({"valid": True, "directory": str(ruleset.directory), "rules": len(ruleset)}))
    else:
        print(msg("rules_valid", args.lang, count=len(ruleset), directory=ruleset.directory))
    return EXIT_OK
