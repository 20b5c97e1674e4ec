"""``oomdoctor fit``: the largest micro-batch (and eval batch) that fits, effective batch kept, verified.

Exit 0 when a candidate passed its probe (the winner's patch folder is written), 1 when none did, 2 for bad
input. ``trial/fit.py`` does the work; this module parses, prints progress and the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from oomdoctor.commands._inputs import add_json, number_in, positive_number
from oomdoctor.commands.trial import MAX_TIMEOUT_S
from oomdoctor.errors import EXIT_FAILED, EXIT_OK
from oomdoctor.i18n import Lang, help_text, msg, pick
from oomdoctor.report import units

if TYPE_CHECKING:
    from oomdoctor.trial.fit import Candidate, FitResult


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True,
                        help=help_text("help_fit_config"))  # fmt: skip
    parser.add_argument("--out", required=True,
                        help=help_text("help_fit_out"))  # fmt: skip
    parser.add_argument("--gpu-mib", type=positive_number, metavar="N",
                        help=help_text("help_fit_gpu_mib"))  # fmt: skip
    parser.add_argument("--margin", type=number_in(0.0, 0.9), default=0.1,
                        help=help_text("help_fit_margin"))  # fmt: skip
    parser.add_argument("--launcher", default="llamafactory-cli train",
                        help=help_text("help_fit_launcher"))  # fmt: skip
    parser.add_argument("--timeout", type=number_in(0, MAX_TIMEOUT_S, low_open=True), default=600.0,
                        help=help_text("help_fit_timeout"))  # fmt: skip
    add_json(parser)


def table(result: FitResult, lang: Lang) -> list[str]:
    """What was tried, one row per probe."""
    from oomdoctor.report.table import table as text_table

    headers = [msg(f"fit_h_{k}", lang) for k in ("try", "batch", "acc", "eval", "effective", "predicted",
                                                  "measured", "outcome")]  # fmt: skip
    rows = []
    for n, tried in enumerate(result.tried, start=1):
        c = tried.candidate
        outcome = msg("fit_passed", lang) if tried.passed else msg(
            "fit_failed_at", lang, milestone=msg(f"milestone_{tried.failed_milestone}", lang)
            if tried.failed_milestone else tried.outcome)  # fmt: skip
        rows.append([str(n), str(c.micro_batch), str(c.accumulation), str(c.eval_batch),
                     str(c.micro_batch * c.accumulation * result.world_size),
                     units.mib(c.predicted_mib, unit=False), units.mib(tried.peak_mib, unit=False),
                     outcome])  # fmt: skip
    return text_table(headers, rows)


def report(result: FitResult, lang: Lang) -> list[str]:
    lines = [msg("fit_header", lang, budget=units.mib(result.budget_mib, unit=False),
                 margin=round(result.margin * 100), limit=units.mib(result.limit_mib, unit=False),
                 effective=result.effective_batch)]  # fmt: skip
    if result.calibrated_by:
        lines.append(msg("fit_calibrated_by", lang, trial=result.calibrated_by))
    lines += [f"  - {pick(note, lang)}" for note in result.notes]
    lines += ["", *table(result, lang), ""]
    winner = result.winner
    if winner is None:
        lines.append(msg("fit_no_winner", lang, probes=len(result.tried), folder=result.folder))
    elif result.unchanged:
        lines.append(msg("fit_unchanged", lang, folder=result.folder))
    else:
        effective = winner.micro_batch * winner.accumulation * result.world_size
        kept = msg("fit_kept" if effective == result.effective_batch else "fit_not_kept", lang)
        lines.append(msg("fit_winner", lang, batch=winner.micro_batch, accumulation=winner.accumulation,
                         eval_batch=winner.eval_batch, effective=effective, kept=kept, folder=result.folder))  # fmt: skip
        lines += [msg("fit_run_with", lang), f"  {result.command}"]
    return lines


def run(args: argparse.Namespace) -> int:
    from oomdoctor.trial.fit import run_fit

    lang: Lang = args.lang
    progress = sys.stderr if args.json else sys.stdout

    def on_probe(n: int, c: Candidate) -> None:
        progress.write(msg("fit_probing", lang, n=n, batch=c.micro_batch, accumulation=c.accumulation,
                           eval_batch=c.eval_batch, predicted=units.mib(c.predicted_mib, unit=False)) + "\n")  # fmt: skip
        progress.flush()

    result = run_fit(args.config, args.out, budget_mib=args.gpu_mib, margin=args.margin, launcher=args.launcher,
                     timeout_s=args.timeout, on_probe=on_probe)  # fmt: skip
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        print("\n".join(report(result, lang)))
    return EXIT_OK if result.ok else EXIT_FAILED
