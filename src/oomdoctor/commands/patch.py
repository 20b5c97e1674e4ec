"""``oomdoctor patch``: diagnose, then write the proposed change into a new folder and print the diff and
the command to run it. Exit 0 when written, 1 when there is nothing to write yet (no OOM, a question
unanswered, advice that is not a config change), 2 for bad input."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from oomdoctor import inputs
from oomdoctor.commands._inputs import add_run_inputs, gather_kwargs
from oomdoctor.errors import EXIT_FAILED, EXIT_OK, BadInput
from oomdoctor.i18n import help_text, msg, pick

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Diagnosis, Proposal


def register(parser: argparse.ArgumentParser) -> None:
    add_run_inputs(parser, config_required=True)
    parser.add_argument(
        "--out",
        required=True,
        help=help_text("help_patch_out"),
    )
    parser.add_argument(
        "--rule",
        help=help_text("help_patch_rule"),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=help_text("help_patch_json"),
    )


def choose_proposal(diagnosis: Diagnosis, rule: str | None) -> Proposal | None:
    """The first proposal, or the one (first or alternative) whose rule id is ``rule``."""
    offered = ([diagnosis.proposal] if diagnosis.proposal else []) + list(diagnosis.alternatives)
    if rule is None:
        return diagnosis.proposal
    for proposal in offered:
        if proposal.rule == rule:
            return proposal
    available = ", ".join(p.rule for p in offered) or "-"
    raise BadInput(msg("patch_unknown_rule", None, rule=rule, available=available))


def _writable(proposal: Proposal) -> bool:
    return not proposal.manual and bool(proposal.changes or proposal.env or proposal.files)


def _nothing_to_write(diagnosis: Diagnosis, proposal: Proposal | None, lang: Any, as_json: bool) -> int:
    if proposal is not None:
        reason = msg("patch_manual", lang, title=pick(proposal.title, lang))
        detail = [pick(proposal.why, lang)]
    elif diagnosis.questions:
        reason = msg("patch_needs_answers", lang)
        detail = [f"  {q.key}: {pick(q.text, lang)} [{'/'.join(q.allowed)}]" for q in diagnosis.questions]
    elif not diagnosis.oom:
        reason, detail = msg("patch_no_oom", lang), []
    else:
        reason, detail = msg("patch_no_proposal", lang), []
    if as_json:
        out = {
            "written": False,
            "reason": reason,
            "oom": diagnosis.oom,
            "phase": diagnosis.phase,
            "cause": diagnosis.cause,
            "questions": diagnosis.to_json()["questions"],
            "proposal": None if proposal is None else diagnosis.to_json()["proposal"],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        print(reason)
        for line in detail:
            if line:
                print(line)
    return EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    from oomdoctor.api import run_diagnosis
    from oomdoctor.patch import write_patched_config

    lang = args.lang
    inputs.check_new_folder(args.out)  # before the diagnosis, which may take a while
    diagnosis = run_diagnosis(args.config, args.log, **gather_kwargs(args))
    proposal = choose_proposal(diagnosis, args.rule)
    if proposal is None or not _writable(proposal):
        return _nothing_to_write(diagnosis, proposal, lang, args.json)

    result = write_patched_config(args.config, proposal, args.out)
    if args.json:
        out = {
            "written": True,
            "rule": proposal.rule,
            "folder": str(result.folder),
            "config": str(result.config_path),
            "change": str(result.change_json),
            "diff": result.diff,
            "command": result.command,
            "run_dir": str(result.run_dir) if result.run_dir else None,
            "files": [str(p) for p in result.files],
        }
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return EXIT_OK
    sys.stdout.write(result.diff)
    if result.diff and not result.diff.endswith("\n"):
        print()
    print()
    print(msg("patch_written", lang, folder=result.folder))
    print(f"  {pick(proposal.title, lang)}")
    if result.run_dir is not None and result.command.startswith("cd "):
        keys = ", ".join(result.relative_paths)
        print(msg("patch_run_dir", lang, keys=keys, run_dir=result.run_dir))
    print(msg("patch_run_with", lang))
    print(f"  {result.command}")
    return EXIT_OK
