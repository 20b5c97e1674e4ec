"""``oomdoctor trial``: run a short trial of a config, print progress and the result.

Exit 0 when the trial finished, 1 when it failed (out of memory, non-zero exit, time limit), 2 for bad input.
The trial folder is the record; ``oomdoctor compare`` reads it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from oomdoctor.commands._inputs import int_in, number_in
from oomdoctor.errors import EXIT_FAILED, EXIT_OK
from oomdoctor.i18n import Lang, help_text, msg
from oomdoctor.report import units

if TYPE_CHECKING:
    from oomdoctor.trial.runner import TrialProgress, TrialResult
    from oomdoctor.trial.sampler import SampleSnapshot

# Argument bounds: a trial is minutes to hours of a few steps; sampling faster than 10 ms is a busy loop.
MAX_STEPS = 1_000_000
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 3600.0
HEARTBEAT_S = 10.0  # while no step completes (loading), say the peak this often


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        required=True,
        help=help_text("help_trial_config"),
    )
    parser.add_argument(
        "--steps",
        type=int_in(1, MAX_STEPS),
        default=None,
        help=help_text("help_trial_steps"),
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help=help_text("help_trial_probe"),
    )
    parser.add_argument(
        "--out",
        required=True,
        help=help_text("help_trial_out"),
    )
    parser.add_argument(
        "--timeout",
        type=number_in(0, MAX_TIMEOUT_S, low_open=True),
        default=600.0,
        help=help_text("help_trial_timeout"),
    )
    parser.add_argument(
        "--launcher",
        default="llamafactory-cli train",
        help=help_text("help_trial_launcher"),
    )
    parser.add_argument(
        "--interval",
        type=number_in(MIN_INTERVAL_S, MAX_INTERVAL_S),
        default=0.2,
        help=help_text("help_trial_interval"),
    )
    parser.add_argument(
        "--show-log",
        action="store_true",
        help=help_text("help_trial_show_log"),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=help_text("help_trial_json"),
    )


def _source_label(source: str | None, lang: Lang) -> str:
    return msg("trial_source_host" if source == "host_rss" else "trial_source_gpu", lang)


class _Printer:
    """Progress lines: one per completed step, plus a heartbeat while nothing completes."""

    def __init__(self, lang: Lang, out: TextIO, show_log: bool) -> None:
        self.lang = lang
        self.out = out
        self.show_log = show_log
        self.last_print = time.monotonic()
        self.latest: SampleSnapshot | None = None

    def _print(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
        self.last_print = time.monotonic()

    def on_line(self, line: str) -> None:
        if self.show_log or line.startswith("[oomdoctor]"):
            self._print(line)

    def on_sample(self, snapshot: SampleSnapshot) -> None:
        self.latest = snapshot
        if time.monotonic() - self.last_print >= HEARTBEAT_S and snapshot.peak_mib is not None:
            self._print(
                msg(
                    "trial_heartbeat",
                    self.lang,
                    elapsed=units.number(snapshot.time_s),
                    peak=units.mib(snapshot.peak_mib, unit=False),
                    source=_source_label(snapshot.source, self.lang),
                )  # fmt: skip
            )

    def on_progress(self, progress: TrialProgress) -> None:
        source = self.latest.source if self.latest else None
        self._print(
            msg(
                "trial_progress",
                self.lang,
                step=progress.steps_done,
                total=progress.total_steps or "?",
                elapsed=units.number(progress.elapsed_s, 1),
                peak=units.mib(progress.peak_mib or 0.0, unit=False),
                source=_source_label(source, self.lang),
            )  # fmt: skip
        )


def summary(result: TrialResult, lang: Lang) -> list[str]:
    """The result in a few lines, in the course's terms (peak MiB/GiB, wall seconds, outcome)."""
    r: dict[str, Any] = result.record
    lines = [msg(f"trial_outcome_{r['outcome']}", lang, code=r["exit_code"])]
    if r["peak_memory_mib"] is not None:
        lines.append(
            msg(
                "trial_peak",
                lang,
                mib=units.mib(r["peak_memory_mib"], unit=False),
                gib=units.gib(r["peak_memory_mib"], unit=False),
                source=_source_label(r["peak_source"], lang),
                samples=r["samples"],
            )  # fmt: skip
        )
    lines.append(
        msg(
            "trial_wall",
            lang,
            wall=units.number(r["wall_s"], 2),
            runtime=units.number(r["train_runtime_s"], 2),
        )
    )
    lines.append(
        msg(
            "trial_steps",
            lang,
            done=r["steps_done"],
            total=r["total_steps"] or r["steps_requested"],
            eval_loss=units.number(r["eval_loss"], 4),
            checkpoint=(r["checkpoints"] or ["-"])[-1],
        )  # fmt: skip
    )
    if r["oom"]:
        phase = msg(f"phase_{r['phase']}", lang) if r.get("phase") else "?"
        cause = msg(f"cause_{r['cause']}", lang) if r.get("cause") else "?"
        lines.append(msg("trial_oom", lang, phase=phase, cause=cause, line=r.get("error_line") or "-"))
    if r["warnings"]:
        lines.append(msg("trial_warnings", lang, count=len(r["warnings"]), first=r["warnings"][0]))
    if r["other_gpu_processes"]:
        lines.append(msg("trial_others_note", lang, count=len(r["other_gpu_processes"])))
    lines += milestone_lines(r, lang)
    lines.append(msg("trial_folder", lang, folder=result.folder))
    return lines


def milestone_lines(record: dict[str, Any], lang: Lang) -> list[str]:
    """A probe's milestones, one line each, and what they mean together."""
    marks = record.get("milestones")
    if not marks:
        return []
    lines = [msg("probe_milestones", lang)]
    for mark in marks:
        name = msg(f"milestone_{mark['name']}", lang)
        peak = units.mib(mark.get("peak_mib"), unit=False)
        if mark.get("passed") is None:
            lines.append(msg("probe_milestone_na", lang, name=name))
        elif mark["passed"]:
            lines.append(msg("probe_milestone_passed", lang, name=name, step=mark.get("step"), peak=peak))
        elif mark.get("reached"):
            lines.append(msg("probe_milestone_failed", lang, name=name, peak=peak))
        else:
            lines.append(msg("probe_milestone_unreached", lang, name=name))
    lines.append(msg("probe_all_passed" if record.get("probe_passed") else "probe_not_passed", lang))
    calibration = record.get("calibration")
    if calibration:
        constants = ", ".join(f"{k} {calibration['constants'][k]:g}" for k in calibration["from_calibration"])
        lines.append(msg("cal_written", lang, fitted=calibration["text"][lang], constants=constants,
                         path=calibration.get("file", "-")))  # fmt: skip
    return lines


def run(args: argparse.Namespace) -> int:
    from oomdoctor.trial.runner import run_trial

    lang: Lang = args.lang
    progress_out = sys.stderr if args.json else sys.stdout
    printer = _Printer(lang, progress_out, args.show_log)
    steps = args.steps if args.steps is not None else (1 if args.probe else 50)
    if args.probe:
        printer._print(msg("probe_starting", lang, out=args.out, timeout=units.number(args.timeout)))
    else:
        printer._print(
            msg("trial_starting", lang, out=args.out, steps=steps, timeout=units.number(args.timeout))
        )
    result = run_trial(
        args.config,
        steps=steps,
        probe=args.probe,
        out_dir=args.out,
        timeout_s=args.timeout,
        launcher=args.launcher,
        interval_s=args.interval,
        on_sample=printer.on_sample,
        on_line=printer.on_line,
        on_progress=printer.on_progress,
    )
    if args.json:
        print(json.dumps({"folder": str(result.folder), **result.record}, ensure_ascii=False, indent=2))
    else:
        print()
        for line in summary(result, lang):
            print(line)
    return EXIT_OK if result.ok else EXIT_FAILED
