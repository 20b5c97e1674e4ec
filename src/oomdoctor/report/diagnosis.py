"""The diagnosis as text a person reads in a terminal: what ran out, the account of the card, the findings,
the one change to make and how to apply it. ``oomdoctor diagnose``, ``oomdoctor watch`` (when the run dies) and
the app's watch screen print the same report."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from oomdoctor.i18n import Lang, msg, pick
from oomdoctor.records import record
from oomdoctor.report import units

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Diagnosis, Proposal


# --- the readable report ---------------------------------------------------------------------------------


def _mib(value: float | None) -> str:
    return units.mib(value, unit=False)


def _value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _patch_command(
    proposal: Proposal, config: str | None, log: str | None, known: list[str], first: bool
) -> str:
    words = ["oomdoctor", "patch", "--config", config or "<config.yaml>"]
    if log:
        words += ["--log", log]
    words += known
    if not first:
        words += ["--rule", proposal.rule]
    words += ["--out", "<new folder>"]
    return " ".join(shlex.quote(w) if not w.startswith("<") else w for w in words)


def _proposal_lines(proposal: Proposal, lang: Lang) -> list[str]:
    lines = [f"  {pick(proposal.title, lang)}   [{proposal.rule}]"]
    for field, (old, new) in proposal.changes.items():
        lines.append(f"    {field}: {_value(old)} -> {_value(new)}")
    if proposal.env:
        lines.append(f"    {msg('r_env', lang)}: " + " ".join(f"{k}={v}" for k, v in proposal.env.items()))
    if proposal.files:
        lines.append(f"    {msg('r_files', lang)}: " + ", ".join(proposal.files))
    lines.append(f"  {msg('r_why', lang)}: {pick(proposal.why, lang)}")
    lines.append(f"  {msg('r_cost', lang)}: {pick(proposal.cost, lang)}")
    lines.append(f"  {msg('r_judge', lang)}: {pick(proposal.judge, lang)}")
    for text in proposal.already_on:
        lines.append(f"  {msg('r_already_on', lang)}: {pick(text, lang)}")
    for text in proposal.requires:
        lines.append(f"  {msg('r_requires', lang)}: {pick(text, lang)}")
    effect = proposal.effect
    if effect is not None and effect.after_mib is not None:
        line = msg("r_effect", lang, before=_mib(effect.before_mib), after=_mib(effect.after_mib))
        if effect.fits_after is not None:
            line += f" ({msg('r_effect_fits' if effect.fits_after else 'r_effect_not_fits', lang)})"
        if effect.note:
            line += f"; {pick(effect.note, lang)}"
        lines.append(f"  {line}")
    elif effect is not None and effect.note:
        lines.append(f"  {pick(effect.note, lang)}")
    return lines


def report(
    diagnosis: Diagnosis,
    lang: Lang,
    *,
    config: str | None = None,
    log: str | None = None,
    known: list[str] | None = None,
) -> str:
    """The diagnosis as text a person reads in a terminal, in ``lang``: the headline, the OOM message's
    numbers and account, the findings, the questions, the proposal and the alternatives."""
    d = diagnosis
    patch = _PatchCommand(config, log, known or [])
    out = [_headline(d, lang)]
    out += _number_lines(d, lang)
    # What a guard skipped is shown with the proposal ("Already on"); list it here only without one.
    shown = [f for f in d.findings if d.proposal is None or not f.id.startswith("guard.")]
    if shown:
        out += ["", msg("r_findings", lang)]
        out += [f"  - {pick(f.text, lang)}" for f in shown]
    out += _question_lines(d, lang)
    out += _proposal_section(d, lang, patch)
    out += _alternative_lines(d, lang, patch)
    return "\n".join(out)


@record(frozen=True)
class _PatchCommand:
    """The files and flags the report's ``oomdoctor patch`` command lines repeat."""

    config: str | None
    log: str | None
    known: list[str]

    def line(self, proposal: Proposal, *, first: bool) -> str:
        return _patch_command(proposal, self.config, self.log, self.known, first)


def _headline(d: Diagnosis, lang: Lang) -> str:
    """Where it ran out and what filled the memory (at which step); or why no OOM is reported."""
    if not d.oom:
        no_line = any(f.id == "no_error_line" for f in d.findings)
        stops = any(f.id.startswith("log_stops_") for f in d.findings)
        return msg("r_no_error_line" if no_line else "r_log_stops" if stops else "r_no_oom", lang)
    phase, cause = msg(f"phase_{d.phase}", lang), msg(f"cause_{d.cause}", lang)
    if d.step is not None:
        return msg("r_oom_step", lang, step=d.step, phase=phase, cause=cause)
    return msg("r_oom", lang, phase=phase, cause=cause)


def _number_lines(d: Diagnosis, lang: Lang) -> list[str]:
    """The OOM message's numbers in one line, and the message read as an account of the card."""
    lines: list[str] = []
    numbers = [
        msg(key, lang, mib=_mib(value))
        for key, value in (
            ("r_num_requested", d.requested_mib),
            ("r_num_capacity", d.capacity_mib),
            ("r_num_free", d.free_mib),
            ("r_num_reserved", d.reserved_unallocated_mib),
        )
        if value is not None
    ]
    if numbers:
        lines.append(msg("r_numbers_sep", lang).join(numbers) + msg("r_numbers_end", lang))
    if d.account is not None:
        lines.append(f"{msg('r_account', lang)} {pick(d.account['line'], lang)}")
    return lines


def _question_lines(d: Diagnosis, lang: Lang) -> list[str]:
    """Each question with its answers and the flag that gives one."""
    if not d.questions:
        return []
    lines = ["", msg("r_questions", lang)]
    for q in d.questions:
        lines.append(f"  ? {pick(q.text, lang)}")
        lines += [f"      {a.value}: {pick(a.label, lang)}" for a in q.answers]
        lines.append(f"    {msg('r_answer_hint', lang, question=q.key, allowed='|'.join(q.allowed))}")
    return lines


def _proposal_section(d: Diagnosis, lang: Lang, patch: _PatchCommand) -> list[str]:
    """The proposal and the command that writes it (a manual one has none); without a proposal, why not."""
    if d.proposal is None:
        return ["", msg("r_no_proposal" if d.questions else "r_no_rule", lang)] if d.oom else []
    lines = ["", msg("r_manual" if d.proposal.manual else "r_proposal", lang)]
    lines += _proposal_lines(d.proposal, lang)
    if not d.proposal.manual:
        lines += ["", msg("r_patch_hint", lang), f"  {patch.line(d.proposal, first=True)}"]
    return lines


def _alternative_lines(d: Diagnosis, lang: Lang, patch: _PatchCommand) -> list[str]:
    """The other proposals that also matched, each with its own patch command."""
    if not d.alternatives:
        return []
    lines = ["", msg("r_alternatives", lang)]
    for alt in d.alternatives:
        lines.append(f"  - {pick(alt.title, lang)}   [{alt.rule}]")
        if not alt.manual:
            lines.append(f"      {patch.line(alt, first=False)}")
    return lines
