"""Build the domain objects first, then the app around them; tests call the same factory with fakes
(a scripted GPU source, a trial launcher that writes a trial folder, a fixed clock)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.demo import demo_known, demo_paths
from oomdoctor.i18n import Lang, default_lang

if TYPE_CHECKING:
    from oomdoctor.facts.gpu import GpuSource
    from oomdoctor.tui.app import Clock, OomDoctorApp, TrialLauncher

# Update steps of a short trial: the same as ``oomdoctor trial``'s default, so trials started here and
# there compare (compare_trials flags trials run for different step counts). The trial sets eval and save
# steps to this number, so every phase is passed once.
DEFAULT_TRIAL_STEPS = 50
# What run_trial starts by default ("llamafactory-cli train"): checked before a trial from the app.
LAUNCHER_PROGRAM = "llamafactory-cli"


def build_app(
    config: str | os.PathLike[str] | None = None,
    log: str | os.PathLike[str] | None = None,
    lang: Lang | None = None,
    gpu_source: GpuSource | None = None,
    trial_launcher: TrialLauncher | None = None,
    clock: Clock | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    demo: bool = False,
    scan_at_start: bool = True,
    trial_steps: int = DEFAULT_TRIAL_STEPS,
    known: dict[str, Any] | None = None,
) -> OomDoctorApp:
    """The app for one session. With neither ``config`` nor ``log`` (and not ``demo``) it scans ``cwd``
    for runs and opens the newest (``scan_at_start``), else shows the picker. ``known`` holds what the
    user told us beyond the files (``api.gather`` keywords such as ``lengths_file``)."""
    from oomdoctor.tui.app import OomDoctorApp
    from oomdoctor.tui.session import Session

    if demo:
        config, log = demo_paths()
    if gpu_source is None:
        from oomdoctor.facts.gpu import NvmlSource

        gpu_source = NvmlSource()
    launcher_program = None
    if trial_launcher is None:
        from oomdoctor.trial.runner import run_trial

        trial_launcher, launcher_program = run_trial, LAUNCHER_PROGRAM
    session = Session(
        cwd=Path(cwd if cwd is not None else Path.cwd()).resolve(),
        lang=lang or default_lang(),
        config=Path(config) if config is not None else None,
        log=Path(log) if log is not None else None,
        is_demo=demo,
        known=demo_known() if demo else dict(known or {}),
    )
    return OomDoctorApp(
        session=session,
        gpu_source=gpu_source,
        trial_launcher=trial_launcher,
        clock=clock or time.monotonic,
        trial_steps=trial_steps,
        scan_at_start=scan_at_start,
        launcher_program=launcher_program,
    )
