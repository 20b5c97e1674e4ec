"""``oomdoctor demo``: the interactive app on the bundled demo case (the course config and its OOM log)."""

from __future__ import annotations

import argparse

from oomdoctor.errors import EXIT_OK
from oomdoctor.i18n import help_text


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trial-steps",
        type=int,
        default=None,
        help=help_text(
            "optimizer steps of a short trial (default 50, as oomdoctor trial)",
            "试跑的优化步数(默认 50,与 oomdoctor trial 相同)",
        ),
    )


def run(args: argparse.Namespace) -> int:
    from oomdoctor.tui.factory import DEFAULT_TRIAL_STEPS, build_app

    steps = getattr(args, "trial_steps", None) or DEFAULT_TRIAL_STEPS
    app = build_app(lang=args.lang, demo=True, trial_steps=steps)
    result = app.run()
    return int(result) if result is not None else EXIT_OK
