"""``oomdoctor demo``: the interactive app on the bundled demo case (the course config and its OOM log)."""

from __future__ import annotations

import argparse

from oomdoctor.commands.tui import add_trial_steps, run_app


def register(parser: argparse.ArgumentParser) -> None:
    add_trial_steps(parser)


def run(args: argparse.Namespace) -> int:
    return run_app(args, demo=True)
