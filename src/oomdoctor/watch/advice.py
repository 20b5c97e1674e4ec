"""The plan (what the coming phases need, from the estimate) and the advice (the decision nodes' change for
the out-of-memory a warning foresees): the same rules as ``oomdoctor diagnose``, asked about a failure that
has not happened yet."""

from __future__ import annotations

import functools
from typing import Any

from oomdoctor import records
from oomdoctor.errors import BadInput
from oomdoctor.estimate.memory import constants
from oomdoctor.facts.types import LogFacts, OtherProcess
from oomdoctor.i18n import msg
from oomdoctor.resources import rules_dir
from oomdoctor.rules.facts import Facts
from oomdoctor.text import Lang, Text
from oomdoctor.watch.engine import Advice, Plan

SPEC_FILE = "live/warnings.yaml"


@functools.lru_cache(maxsize=1)
def load_spec() -> dict[str, Any]:
    """``rules/live/warnings.yaml``, checked: every warning kind has its entry with both languages."""
    from oomdoctor.datafiles import load_data_file
    from oomdoctor.watch.engine import CHECKS

    path = rules_dir() / SPEC_FILE
    spec = load_data_file(path)
    if not isinstance(spec, dict):
        raise BadInput(msg("watch_spec_incomplete", None, file=str(path), kind="kinds"))
    for kind in CHECKS:
        entry = (spec.get("kinds") or {}).get(kind)
        texts = [entry.get(key) for key in ("text", "act")] if isinstance(entry, dict) else []
        if (
            not isinstance(entry, dict)
            or not all(isinstance(x, dict) and {"en", "zh"} <= set(x) for x in texts)
            or not texts
            or "hypothesis" not in entry
        ):
            raise BadInput(msg("watch_spec_incomplete", None, file=str(path), kind=kind))
    return spec


def make_plan(facts: Facts, *, on_gpu: bool) -> Plan | None:
    """The phases' extra memory from the estimate; ``None`` without a config."""
    config, est = facts.config, facts.estimate
    if config is None:
        return None
    if est is None:
        return Plan(config, None, None, 0.0, 0.0, config.per_device_eval_batch_size, None,
                    config.per_device_train_batch_size, config.cutoff_len)  # fmt: skip
    static = est.terms["weights"] + est.terms["trainable_state"] + est.terms["overhead"]
    context = float(constants()["cuda_context_mib"][0]) if on_gpu else 0.0
    return Plan(
        config=config,
        eval_extra_mib=est.terms["eval"] if config.do_eval else None,
        train_extra_mib=est.terms["activations"] + est.terms["logits_loss"],
        static_mib=static,
        context_mib=context,
        eval_batch=est.eval_batch,
        eval_len=est.eval_len,
        micro_batch=est.micro_batch,
        padded_len=est.padded_len,
        padded_len_source=est.padded_len_source,
        state_mib=est.terms["trainable_state"],
        accumulation=config.gradient_accumulation_steps,
        save_gpu_parts={k: v for k, v in est.save_gpu_mib.items() if v > 0} if on_gpu else {},
        save_host_parts={k: v for k, v in est.save_host_mib.items() if v > 0} if on_gpu else {},
    )


def _hypothetical_log(kind: str, fields: dict[str, Any]) -> LogFacts:
    spec = load_spec()["kinds"][kind]["hypothesis"]
    values: dict[str, Any] = {}
    for key, value in spec.items():
        values[key] = fields.get(value["from"]) if isinstance(value, dict) else value
    other_pid, other_mib = values.pop("other_pid", None), values.pop("other_mib", None)
    log = LogFacts(
        oom=True, error_line=f"(foreseen by oomdoctor watch: {kind})", phase_confidence="high", **values
    )
    if other_pid is not None:
        log.other_processes = [OtherProcess(pid=int(other_pid), used_mib=float(other_mib or 0.0))]
    return log


def change_text(proposal: Any, spec: dict[str, Any]) -> Text:
    forms = spec["change_forms"]

    def one(lang: Lang) -> str:
        parts = [
            forms["field"][lang].format(field=f, old=old, new=new)
            for f, (old, new) in proposal.changes.items()
        ]
        parts += [forms["env"][lang].format(name=k, value=v) for k, v in proposal.env.items()]
        if not parts:
            parts = [forms["manual"][lang].format(title=proposal.title.get(lang, proposal.rule))]
        return "; ".join(parts)

    return Text.each(one)


def _choose(diagnosis: Any, prefer_cause: str | None, prefer_rule: str | None = None) -> Any:
    """The proposal, or the first matching alternative that is the node for what the warning is about (by
    rule id, then by cause)."""
    candidates = [c for c in [diagnosis.proposal, *diagnosis.alternatives] if c is not None]
    for wanted, attr in ((prefer_rule, "rule"), (prefer_cause, "cause")):
        found = next((c for c in candidates if wanted and getattr(c, attr) == wanted), None)
        if found is not None:
            return found
    return diagnosis.proposal


def make_advise(facts: Facts) -> Any:
    """``advise(kind, fields)``: the proposal the decision nodes make for the foreseen failure."""
    from oomdoctor.rules.assemble import assemble
    from oomdoctor.rules.engine import diagnose

    def advise(kind: str, fields: dict[str, Any]) -> Advice:
        readings = records.replace(
            facts.readings, log=_hypothetical_log(kind, fields), estimate=facts.estimate
        )
        hypothetical = assemble(readings, facts.answers)
        spec = load_spec()["kinds"][kind]
        prefer_rule = (spec.get("prefer_rule") or {}).get(fields.get("part"))
        try:
            diagnosis = diagnose(hypothetical)
        except Exception:  # advice is a nicety: a warning stands without it
            diagnosis = None
        proposal = (
            _choose(diagnosis, spec.get("prefer_cause"), prefer_rule) if diagnosis is not None else None
        )
        if proposal is None:
            return Advice(None, {}, {}, Text(en="-", zh="-"))
        return Advice(
            proposal.rule, dict(proposal.changes), dict(proposal.env), change_text(proposal, load_spec())
        )

    return advise
