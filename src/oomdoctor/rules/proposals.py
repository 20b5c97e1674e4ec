"""One matching node made concrete: the ``{field: [old, new]}`` its change operators compute, its texts
filled with the facts, what it needs installed, and the estimator's peak before and after."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

from oomdoctor.diagnosis import EstimatedEffect, Finding, Proposal
from oomdoctor.errors import BadInput
from oomdoctor.i18n import both, msg
from oomdoctor.rules import change_ops
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.loader import LoadedNode
from oomdoctor.rules.nodes import RuleNode
from oomdoctor.rules.texts import mib_text, render
from oomdoctor.text import Text

# A config field the log also reports: used for "old" values when only a log was given.
LOG_EQUIVALENTS: dict[str, str] = {
    "per_device_train_batch_size": "instantaneous_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}
# Which of the estimator's phases a located phase is judged by (its peak before and after a change).
ESTIMATE_PHASE: dict[str, str] = {
    "load": "load",
    "first_batch": "train",
    "long_sample": "train",
    "optimizer_step": "train",
    "save": "train",
    "eval": "eval",
}


def old_value(field: str, facts: Facts) -> Any:
    """The value in effect: the config's (defaults applied), else the log's equivalent."""
    if facts.config is not None:
        from oomdoctor.facts.config import setting

        return setting(facts.config, field)
    if facts.log is not None and field in LOG_EQUIVALENTS:
        return getattr(facts.log, LOG_EQUIVALENTS[field])
    return None


def compute_changes(node: RuleNode, facts: Facts) -> tuple[dict[str, list[Any]], list[Finding]]:
    """``{field: [old, new]}`` for the node's change, plus findings about it (e.g. an inexact product).
    Raises ``change_ops.ChangeNotComputable`` when a value it needs is unknown."""
    olds = {name: old_value(name, facts) for name in node.change}
    ops = {name: (op.op, op.operand) for name, op in node.change.items()}
    news, notes = change_ops.compute(ops, olds, facts.get)
    findings = [
        Finding(id=f"{node.id}.inexact_product", text=both(key, **fields), severity="warning")
        for key, fields in notes
    ]
    # a field already at the value the node sets is in effect, not a change (the diff shows only real edits)
    changes = {name: [olds[name], news[name]] for name in node.change if olds[name] != news[name]}
    if node.write_deepspeed_template is not None:
        changes["deepspeed"] = [old_value("deepspeed", facts), f"{node.write_deepspeed_template}.json"]
    return changes, findings


def _template(name: str) -> dict[str, Any]:
    """A DeepSpeed template shipped in configs/deepspeed/ (read, never modified)."""
    from oomdoctor.resources import configs_dir

    path = configs_dir() / "deepspeed" / f"{name}.json"
    try:
        template: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return template
    except (OSError, ValueError) as err:
        raise BadInput(msg("template_missing", None, path=path, detail=err)) from None


def cause_of(node: RuleNode, facts: Facts) -> str:
    """The cause a node names with these facts (a fixed one, or the one a fact maps to)."""
    cause = node.locates.cause
    if isinstance(cause, str):
        return cause
    value = facts.get(cause.fact)
    return cause.map.get(str(value), cause.default) if value is not None else cause.default


def _requirements(node: RuleNode) -> list[Text]:
    out = []
    for req in node.requires:
        installed = importlib.util.find_spec(req.module.split(".")[0]) is not None
        key = "requires_installed" if installed else "requires_missing"
        out.append(both(key, package=req.package))
    return out


def _peak_elsewhere(after_phases: dict[str, float], phase: str, after_mib: float) -> str | None:
    """The estimator's phase whose peak is now above the one that ran out, if any."""
    top = max(after_phases, key=lambda name: after_phases[name]) if after_phases else phase
    return top if top != phase and after_phases[top] > after_mib else None


def estimate_effect(changes: dict[str, list[Any]], facts: Facts) -> EstimatedEffect | None:
    """The estimator's peak before and after the change, in the phase where memory ran out (a smaller
    training batch does not lower an evaluation peak, and the other way round). None without a model."""
    if facts.estimate is None or facts.model is None or facts.config is None or not changes:
        return None
    from oomdoctor.estimate import estimate, with_changes

    phase = ESTIMATE_PHASE.get(facts.derived.phase)
    before = facts.estimate.phases.get(phase) if phase else None
    if before is None:
        phase, before = None, facts.estimate.peak_allocated_mib
    # YAML values, as with_changes expects; a DeepSpeed template is recognised by its LLaMA-Factory name.
    new_values: dict[str, Any] = {name: pair[1] for name, pair in changes.items()}
    try:
        changed = with_changes(facts.config, new_values)
        after = estimate(
            changed,
            facts.model,
            data=facts.data,
            gpu_total_mib=facts.derived.capacity_mib,
            calibration=facts.calibration(),  # a probe's calibration, when the estimate had one
        )
    except Exception as err:  # the estimate is a help, never a reason for the diagnosis to fail
        return EstimatedEffect(before_mib=before, note=both("effect_unavailable", error=str(err)[:200]))
    if phase is None:
        return EstimatedEffect(before_mib=before, after_mib=after.peak_allocated_mib, fits_after=after.fits)
    after_mib = after.phases.get(phase, after.peak_allocated_mib)
    note = Text.each(lambda lang: msg("effect_phase", lang, phase=msg(f"estimate_phase_{phase}", lang)))
    top = _peak_elsewhere(after.phases, phase, after_mib)
    if top is None:
        return EstimatedEffect(before_mib=before, after_mib=after_mib, fits_after=after.fits, note=note)
    # The run's fit is decided in another phase (say evaluation at the default batch of 8): this change alone
    # does not settle it, so say where the peak now is instead of a fit verdict.
    other = both("effect_other_peak", phase=both(f"estimate_phase_{top}"), mib=mib_text(after.phases[top]))
    note = Text(en=f"{note.en}; {other.en}", zh=f"{note.zh}; {other.zh}")
    return EstimatedEffect(before_mib=before, after_mib=after_mib, fits_after=None, note=note)


def _same_value(old: Any, new: Any) -> bool:
    if isinstance(old, int | float) and isinstance(new, int | float) and not isinstance(old, bool):
        return float(old) == float(new)
    return bool(old == new)


def build_proposal(
    loaded: LoadedNode, facts: Facts, *, with_effect: bool = True
) -> tuple[Proposal | None, list[Finding]]:
    """The node as a concrete proposal; None when its change would change nothing. ``with_effect`` False
    skips the estimator (a question probing what an answer would propose needs only the rule)."""
    node = loaded.node
    changes, notes = compute_changes(node, facts)
    if changes and not node.env and all(_same_value(old, new) for old, new in changes.values()):
        return None, []
    files = {}
    if node.write_deepspeed_template is not None:
        files[f"{node.write_deepspeed_template}.json"] = _template(node.write_deepspeed_template)
    proposal = Proposal(
        rule=node.id,
        title=render(node.title, facts, changes),
        changes=changes,
        why=render(node.why, facts, changes),
        cost=render(node.cost, facts, changes),
        judge=render(node.judge, facts, changes),
        cause=cause_of(node, facts),
        env=dict(node.env),
        files=files,
        requires=_requirements(node),
        manual=node.manual,
        next=list(node.next),
    )
    if with_effect:
        proposal.effect = estimate_effect(changes, facts)
    return proposal, notes
