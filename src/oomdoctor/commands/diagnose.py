"""``oomdoctor diagnose``: locate the OOM in a config + log and propose one change.

Exit 1 when the run ran out of memory (the diagnosed run failed, whatever we propose), 0 when the log shows
no OOM, 2 for bad input. ``--json`` prints the contract object (``Diagnosis.to_json()``).
"""

from __future__ import annotations

import argparse
import json

from oomdoctor.commands._inputs import add_run_inputs, gather_kwargs, known_fact_words
from oomdoctor.errors import EXIT_FAILED, EXIT_OK
from oomdoctor.i18n import help_text

__all__ = ["register", "run"]


def register(parser: argparse.ArgumentParser) -> None:
    add_run_inputs(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help=help_text("help_diagnose_json"),
    )


def run(args: argparse.Namespace) -> int:
    from oomdoctor.api import run_diagnosis

    diagnosis = run_diagnosis(args.config, args.log, **gather_kwargs(args))
    if args.json:
        print(json.dumps(diagnosis.to_json(), ensure_ascii=False, indent=2))
    else:
        from oomdoctor.report.diagnosis import report  # the text report (and shlex) only where it is printed

        print(report(diagnosis, args.lang, config=args.config, log=args.log, known=known_fact_words(args)))
    return EXIT_FAILED if diagnosis.oom else EXIT_OK
