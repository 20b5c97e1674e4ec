"""``oomdoctor`` / ``oomdoctor tui``: the interactive app. Textual is imported only inside ``run``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from oomdoctor import inputs
from oomdoctor.commands._inputs import add_known_facts, gather_kwargs, int_in
from oomdoctor.errors import EXIT_OK, BadInput, one_line
from oomdoctor.i18n import both, help_text, msg


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        help=help_text("help_tui_config"),
    )
    parser.add_argument(
        "--log",
        help=help_text("help_tui_log"),
    )
    add_known_facts(parser)
    add_trial_steps(parser)


def add_trial_steps(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trial-steps",
        type=int_in(1, 1_000_000),
        default=None,
        help=help_text("help_tui_trial_steps"),
    )


def run_app(args: argparse.Namespace, **build: Any) -> int:
    """Build the app (textual is imported here, not at start-up), run it, and return its exit code."""
    from oomdoctor.tui.factory import DEFAULT_TRIAL_STEPS, build_app

    steps = getattr(args, "trial_steps", None) or DEFAULT_TRIAL_STEPS
    app = build_app(lang=args.lang, trial_steps=steps, **build)
    result = app.run()
    return int(result) if result is not None else EXIT_OK


def check_file(path: str | None, what: str, label: str) -> Path | None:
    """A one-line error before the screen opens, rather than a dialog after: the path must be a regular
    file (never a FIFO the app would block on). ``label``: the catalogue key of its name in the error."""
    if path is None:
        return None
    p = Path(path)
    if not os.path.lexists(p):
        raise BadInput(msg("file_missing", None, what=both(label), path=one_line(path)))
    inputs.stat_regular(p, what=what)
    return p


def run(args: argparse.Namespace) -> int:
    config = check_file(getattr(args, "config", None), "config", "what_run_config")
    if config is not None:
        from oomdoctor.facts.config import read_config

        read_config(config)  # a config the app could not read is refused here, in one line
    log = check_file(getattr(args, "log", None), "log", "what_log")
    return run_app(args, config=config, log=log, known=gather_kwargs(args))
