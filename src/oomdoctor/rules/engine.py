"""Walk the decision nodes over the facts and answer with one Diagnosis: where memory ran out, what filled
it, one proposed change, the alternatives, and what to ask when the files cannot tell.

The engine knows no LLaMA-Factory fact itself: the nodes (rules/*.yaml) say when a change applies and what
it costs; the engine evaluates conditions (three-valued: unknown facts make questions, not guesses),
computes the concrete ``{field: [old, new]}``, renders texts, and asks the estimator for the effect.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from oomdoctor.diagnosis import Answer, Diagnosis, EstimatedEffect, Finding, Proposal, Question
from oomdoctor.errors import BadInput
from oomdoctor.facts.types import ConfigFacts, to_jsonable
from oomdoctor.i18n import LANGS, both, msg
from oomdoctor.rules import operators
from oomdoctor.rules.derive import derive
from oomdoctor.rules.facts import Facts
from oomdoctor.rules.loader import PLACEHOLDER, LoadedNode, RuleSet, load_rules
from oomdoctor.rules.nodes import Condition, LocalText, RuleNode
from oomdoctor.rules.questions import BUILTIN_QUESTIONS, builtin_question

__all__ = ["diagnose", "load_rules", "evaluate", "walk_rules", "choose_questions", "RuleSet", "Walk"]

# When no node proposes anything, the phase alone says what most likely filled the memory.
CAUSE_BY_PHASE: dict[str, str] = {
    "load": "weights",
    "first_batch": "activations",
    "long_sample": "activations",
    "eval": "eval_batch",
    "save": "save_copy",
    "optimizer_step": "optimizer_state",
    "unknown": "unknown",
}
# A config field the log also reports: used for "old" values when only a log was given.
LOG_EQUIVALENTS: dict[str, str] = {
    "per_device_train_batch_size": "instantaneous_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}
# The estimator's term names, as the user reads them.
TERM_NAMES: dict[str, dict[str, str]] = {
    "weights": {"en": "weights", "zh": "模型权重"},
    "trainable_state": {"en": "trainable state (gradients + optimizer)", "zh": "可训练状态(梯度与优化器)"},
    "activations": {"en": "stored activations", "zh": "中间激活"},
    "logits_loss": {"en": "logits and loss", "zh": "logits 与损失计算"},
    "eval": {"en": "evaluation", "zh": "验证"},
    "overhead": {"en": "overhead", "zh": "运行开销"},
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
# Findings are shown when the fact is worth a line, e.g. a reserved-but-unallocated block of this share of
# the request or more.
FRAGMENTATION_FINDING_SHARE = 0.5
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(ConfigFacts)}
# Questions go out one tier at a time, the most decisive first: where it ran out decides which nodes apply
# at all; which memory (and whether the weights loaded) picks the branch; card facts and the nodes' own
# questions only choose within it. The nodes' own questions join the last tier.
QUESTION_TIERS: tuple[tuple[str, ...], ...] = (("phase",), ("weights_loaded", "memory_kind"), ("card_bf16",))
# An answer to the key settles these facts too (a phase past loading means the weights loaded).
SETTLED_BY: dict[str, tuple[str, ...]] = {"phase": ("weights_loaded",)}


class ChangeNotComputable(Exception):
    """A node's change needs a value the facts do not hold (e.g. halving an unknown batch size)."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


# --- conditions ------------------------------------------------------------------------------------------


def evaluate(condition: Condition, facts: Facts) -> bool | None:
    """Three-valued: True, False, or None when an unknown fact decides it."""
    if condition.fact is not None:
        assert condition.op is not None
        return operators.apply(condition.op, facts.get(condition.fact), condition.operand, facts.get)
    if condition.all_ is not None:
        results = [evaluate(c, facts) for c in condition.all_]
        if any(r is False for r in results):
            return False
        return None if any(r is None for r in results) else True
    if condition.any_ is not None:
        results = [evaluate(c, facts) for c in condition.any_]
        if any(r is True for r in results):
            return True
        return None if any(r is None for r in results) else False
    assert condition.not_ is not None
    inner = evaluate(condition.not_, facts)
    return None if inner is None else not inner


# --- answers and questions -------------------------------------------------------------------------------


def check_answers(answers: dict[str, str], rules: RuleSet) -> None:
    """Unknown question or value -> BadInput naming what is allowed."""
    for key, value in answers.items():
        spec = rules.questions.get(key)
        if spec is None:
            raise BadInput(
                msg("unknown_question", None, question=key, allowed=", ".join(sorted(rules.questions)))
            )
        if value not in spec.allowed:
            raise BadInput(msg("bad_answer", None, key=key, value=value, allowed=", ".join(spec.allowed)))


def _question_for(loaded: LoadedNode) -> Question:
    node = loaded.node
    assert node.ask is not None
    if node.ask.key in BUILTIN_QUESTIONS:
        return builtin_question(node.ask.key, node.id)
    assert node.ask.text is not None and node.ask.answers is not None
    return Question(
        key=node.ask.key,
        text=node.ask.text.as_dict(),
        answers=[Answer(value=a.value, label=a.label.as_dict()) for a in node.ask.answers],
        asked_by=node.id,
    )


def _open_builtin_keys(facts: Facts) -> list[str]:
    """Built-in questions whose fact is still open: unknown, or only assumed (memory_kind of a cut traceback
    while loading or saving)."""
    d, answered = facts.derived, facts.answers
    open_keys = []
    if d["phase"] == "unknown":
        open_keys.append("phase")
    if d["weights_loaded"] is None:
        open_keys.append("weights_loaded")
    if d["memory_kind"] is None or d["memory_kind_source"] == "assumed":
        open_keys.append("memory_kind")
    if d["card_bf16"] is None:
        open_keys.append("card_bf16")
    return [key for key in open_keys if key not in answered]


def choose_questions(facts: Facts, rules: RuleSet, walk: Walk) -> list[Question]:
    """Ask only what could change the proposal, one tier at a time, most decisive first (QUESTION_TIERS):
    a question none of whose answers changes the proposed rule is noise, and so is a card question while the
    phase is still open (the next diagnosis, with the phase answered, asks it if it still matters)."""
    node_asks: dict[str, LoadedNode] = {}
    for loaded in walk.undecided:
        key = loaded.node.ask.key if loaded.node.ask is not None else None
        if key is not None and key not in BUILTIN_QUESTIONS and key not in facts.answers:
            node_asks.setdefault(key, loaded)
    open_keys = _open_builtin_keys(facts)
    tiers = [[key for key in tier if key in open_keys] for tier in QUESTION_TIERS]
    tiers[-1] += list(node_asks)
    for index, tier in enumerate(tiers):
        later = [key for rest in tiers[index + 1 :] for key in rest]
        asked = []
        for key in tier:
            context_keys = [k for k in later if k not in SETTLED_BY.get(key, ())]
            brings = _answer_that_changes(key, facts, rules, context_keys, walk.top)
            if brings is None:
                continue
            if key in node_asks:
                asked.append(_question_for(node_asks[key]))
            else:
                asked.append(builtin_question(key, brings or "engine"))
        if asked:
            return asked
    return []


def _top_with(facts: Facts, rules: RuleSet, answers: dict[str, str]) -> str | None:
    """The rule proposed if the user also gave ``answers``."""
    if not answers:
        return walk_rules(facts, rules, with_effect=False).top
    answered = dataclasses.replace(facts, answers={**facts.answers, **answers})
    answered.derived = derive(answered, reuse=facts.derived)
    return walk_rules(answered, rules, with_effect=False).top


def _answer_that_changes(
    key: str, facts: Facts, rules: RuleSet, context_keys: list[str], current: str | None
) -> str | None:
    """The rule some answer to ``key`` would propose instead ("" when that answer leaves no proposal), or None
    when no answer changes the proposal. The later questions' answers are tried too (each combination), so
    the phase is worth asking even when a proposal also needs the memory kind, which is asked next."""
    contexts: list[dict[str, str]] = [{}]
    if context_keys:
        choices = [rules.questions[k].allowed for k in context_keys]
        contexts += [dict(zip(context_keys, combo, strict=True)) for combo in itertools.product(*choices)]
    for context in contexts:
        base = _top_with(facts, rules, context) if context else current
        for value in rules.questions[key].allowed:
            top = _top_with(facts, rules, {**context, key: value})
            if top != base:
                return top or ""
    return None


# --- changes ---------------------------------------------------------------------------------------------


def old_value(field: str, facts: Facts) -> Any:
    """The value in effect: the config's (defaults applied), else the log's equivalent."""
    config = facts.config
    if config is not None:
        if field in _CONFIG_FIELDS:
            return getattr(config, field)
        if field in config.raw:
            return config.raw[field]
        return _lf_default(field)
    if facts.log is not None and field in LOG_EQUIVALENTS:
        return getattr(facts.log, LOG_EQUIVALENTS[field])
    return None


def _lf_default(field: str) -> Any:
    """LLaMA-Factory's default for a key the config leaves out (facts/config.py owns the table)."""
    from oomdoctor.facts.config import lf_defaults

    return lf_defaults().get(field)


def _as_number(value: Any, field: str) -> float:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        raise ChangeNotComputable(field)
    return value


def compute_changes(node: RuleNode, facts: Facts) -> tuple[dict[str, list[Any]], list[Finding]]:
    """``{field: [old, new]}`` for the node's change, plus findings about it (e.g. an inexact product)."""
    notes: list[Finding] = []
    olds = {name: old_value(name, facts) for name in node.change}
    news: dict[str, Any] = {}
    for name, op in node.change.items():
        old = olds[name]
        if op.op == "set":
            news[name] = op.operand
        elif op.op == "remove":
            news[name] = None
        elif op.op == "set_from":
            value = facts.get(op.operand)
            if value is None:
                raise ChangeNotComputable(op.operand)
            news[name] = value
        elif op.op == "halve":
            news[name] = max(1, int(_as_number(old, name)) // 2)
        elif op.op == "double":
            news[name] = _as_number(old, name) * 2
        elif op.op == "scale":
            scaled = _as_number(old, name) * op.operand
            news[name] = max(1, round(scaled)) if isinstance(old, int) else scaled
    for name, op in node.change.items():
        if op.op != "keep_product_with":
            continue
        partner = op.operand
        before = _as_number(olds[name], name) * _as_number(olds[partner], partner)
        new_partner = _as_number(news[partner], partner)
        kept = math.ceil(before / new_partner)
        news[name] = kept
        if kept * new_partner != before:
            notes.append(
                Finding(
                    id=f"{node.id}.inexact_product",
                    text=both(
                        "f_inexact_product",
                        field=name,
                        partner=partner,
                        before=int(before),
                        after=int(kept * new_partner),
                    ),
                    severity="warning",
                )
            )
    # a field already at the value the node sets is in effect, not a change (the diff shows only real edits)
    changes = {name: [olds[name], news[name]] for name in node.change if olds[name] != news[name]}
    if node.write_deepspeed_template is not None:
        changes["deepspeed"] = [old_value("deepspeed", facts), f"{node.write_deepspeed_template}.json"]
    return changes, notes


def _template(name: str) -> dict[str, Any]:
    """A DeepSpeed template shipped in configs/deepspeed/ (read, never modified)."""
    from oomdoctor.resources import configs_dir

    path = configs_dir() / "deepspeed" / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInput(msg("template_missing", None, path=path, detail=err)) from None


# --- texts -----------------------------------------------------------------------------------------------


def _show(value: Any, spec: str | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "true" if value else "false"
    if spec:
        try:
            return format(value, spec)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.2f}".rstrip("0").rstrip(".")
    if isinstance(value, list | tuple):
        return ", ".join(_show(v, None) for v in value)
    return str(value)


def render(text: LocalText, facts: Facts, changes: dict[str, list[Any]]) -> dict[str, str]:
    """Fill ``{fact.path}``, ``{old.field}``, ``{new.field}`` (optionally ``{path:.0f}``) in both languages."""

    def fill(match: Any) -> str:
        ref, spec = match.group(1), match.group(2)
        head, _, rest = ref.partition(".")
        if head in ("old", "new"):
            pair = changes.get(rest)
            value = None if pair is None else pair[0 if head == "old" else 1]
        else:
            value = facts.get(ref)
        return _show(value, spec)

    return {"en": PLACEHOLDER.sub(fill, text.en), "zh": PLACEHOLDER.sub(fill, text.zh)}


# --- proposals -------------------------------------------------------------------------------------------


def _cause_of(node: RuleNode, facts: Facts) -> str:
    cause = node.locates.cause
    if isinstance(cause, str):
        return cause
    value = facts.get(cause.fact)
    return cause.map.get(str(value), cause.default) if value is not None else cause.default


def _requirements(node: RuleNode) -> list[dict[str, str]]:
    out = []
    for req in node.requires:
        installed = importlib.util.find_spec(req.module.split(".")[0]) is not None
        key = "requires_installed" if installed else "requires_missing"
        out.append(both(key, package=req.package))
    return out


def estimate_effect(changes: dict[str, list[Any]], facts: Facts) -> EstimatedEffect | None:
    """The estimator's peak before and after the change, in the phase where memory ran out (a smaller
    training batch does not lower an evaluation peak, and the other way round). None without a model."""
    if facts.estimate is None or facts.model is None or facts.config is None or not changes:
        return None
    try:
        from oomdoctor.estimate import estimate, with_changes
    except ImportError:
        return None
    phase = ESTIMATE_PHASE.get(facts.derived.get("phase", ""))
    before = facts.estimate.phases.get(phase) if phase else None
    if before is None:
        phase, before = None, facts.estimate.peak_allocated_mib
    # YAML values, as with_changes expects; a DeepSpeed template is recognised by its LLaMA-Factory name.
    new_values: dict[str, Any] = {name: pair[1] for name, pair in changes.items()}
    try:
        after = estimate(
            with_changes(facts.config, new_values),
            facts.model,
            data=facts.data,
            gpu_total_mib=facts.gpu_total_mib,
        )
    except Exception as err:  # the estimate is a help, never a reason for the diagnosis to fail
        return EstimatedEffect(before_mib=before, note=both("effect_unavailable", error=str(err)[:200]))
    after_mib = after.phases.get(phase, after.peak_allocated_mib) if phase else after.peak_allocated_mib
    if phase is None:
        return EstimatedEffect(before_mib=before, after_mib=after_mib, fits_after=after.fits)
    note = {lang: msg("effect_phase", lang, phase=msg(f"estimate_phase_{phase}", lang)) for lang in LANGS}
    fits_after = after.fits
    top = max(after.phases, key=lambda name: after.phases[name]) if after.phases else phase
    if top != phase and after.phases[top] > after_mib:
        # The run's fit is decided in another phase (say evaluation at the default batch of 8): this change
        # alone does not settle it, so say where the peak now is instead of a fit verdict.
        fits_after = None
        for lang in LANGS:
            other = msg(
                "effect_other_peak",
                lang,
                phase=msg(f"estimate_phase_{top}", lang),
                mib=_mib(after.phases[top]),
            )
            note[lang] = f"{note[lang]}; {other}"
    return EstimatedEffect(before_mib=before, after_mib=after_mib, fits_after=fits_after, note=note)


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
        cause=_cause_of(node, facts),
        env=dict(node.env),
        files=files,
        requires=_requirements(node),
        manual=node.manual,
        next=list(node.next),
    )
    if with_effect:
        proposal.effect = estimate_effect(changes, facts)
    return proposal, notes


def _same_value(old: Any, new: Any) -> bool:
    if isinstance(old, int | float) and isinstance(new, int | float) and not isinstance(old, bool):
        return float(old) == float(new)
    return old == new


# --- findings from the facts -----------------------------------------------------------------------------


def _mib(value: float | None) -> str:
    return "?" if value is None else f"{round(value):,}"


def _in_effect(config: ConfigFacts) -> list[dict[str, str]]:
    items: list[dict[str, str]] = []
    if config.gradient_checkpointing:
        items.append(both("in_gc_default" if config.gradient_checkpointing_by_default else "in_gc"))
    if config.pure_bf16:
        items.append(both("in_pure_bf16"))
    elif config.bf16:
        items.append(both("in_bf16"))
    elif config.fp16:
        items.append(both("in_fp16"))
    if config.enable_liger_kernel:
        items.append(both("in_liger"))
    if config.quantization_bit:
        items.append(both("in_quant", bits=config.quantization_bit))
    if config.zero_stage is not None:
        items.append(both("in_zero", stage=config.zero_stage))
    if config.offload_optimizer:
        items.append(both("in_offload_optimizer"))
    if config.offload_param:
        items.append(both("in_offload_param"))
    return items


def fact_findings(facts: Facts) -> list[Finding]:
    """What the facts themselves show, before any rule: the numbers behind the diagnosis."""
    d, log, config, data = facts.derived, facts.log, facts.config, facts.data
    out: list[Finding] = []

    def add(fid: str, severity: str = "info", **fields: Any) -> None:
        out.append(Finding(id=fid, text=both(f"f_{fid}", **fields), severity=severity))

    if log is None:
        add("no_log")
    elif config is None:
        add("log_only")
    if log is not None and not log.oom and log.traceback_cut and not log.other_error:
        add("traceback_cut", "warning")
    if log is not None and not log.oom and log.other_error:
        add("other_error", "warning", error=log.other_error[:300])
    answered_over_log = d["phase_source"] == "answer" and log is not None and log.oom
    if answered_over_log and log.phase not in ("unknown", "none", d["phase"]):
        add("phase_answer_over_log", answer=d["phase"], log=log.phase)
    if log is not None and d["phase_source"] == "log" and (log.phase_evidence_text or log.phase_evidence):
        evidence = log.phase_evidence_text or [{"en": e, "zh": e} for e in log.phase_evidence]
        out.append(
            Finding(
                id="phase_evidence",
                text={
                    lang: msg(
                        "f_phase_evidence",
                        lang,
                        phase=msg(f"phase_{d['phase']}", lang),
                        evidence="; ".join(e.get(lang) or e.get("en", "") for e in evidence[:3]),
                    )
                    for lang in ("en", "zh")
                },
            )
        )
    if log is not None and d["phase_source"] == "schedule":
        out.append(
            Finding(
                id="phase_by_schedule",
                text={
                    lang: msg(
                        "f_phase_by_schedule", lang, phase=msg(f"phase_{d['phase']}", lang), step=log.step
                    )
                    for lang in ("en", "zh")
                },
            )
        )
    if log is not None and log.requested_mib is not None and log.capacity_mib is not None:
        add(
            "request",
            requested=_mib(log.requested_mib),
            free=_mib(log.free_mib),
            capacity=_mib(log.capacity_mib),
        )
    if (
        log is not None
        and d["reserve_would_fit"]
        and log.reserved_unallocated_mib
        and log.requested_mib
        and log.reserved_unallocated_mib >= FRAGMENTATION_FINDING_SHARE * log.requested_mib
    ):
        add(
            "reserve_would_fit",
            "warning",
            free=_mib(log.free_mib),
            reserved=_mib(log.reserved_unallocated_mib),
            requested=_mib(log.requested_mib),
        )
    if log is not None and log.alloc_retries:
        add("alloc_retries", "warning", count=log.alloc_retries)
    if d["self_listed_pid"] is not None:
        add("self_listed", pid=d["self_listed_pid"])
    if d["other_process_mib"]:
        add(
            "other_processes",
            "warning",
            mib=_mib(d["other_process_mib"]),
            pids=", ".join(str(p) for p in d["other_process_pids"]),
        )
    if d["micro_batch"] and d["accumulation"] and d["effective_batch"]:
        add(
            "effective_batch",
            micro=d["micro_batch"],
            acc=d["accumulation"],
            world=d["world_size"] or 1,
            effective=d["effective_batch"],
        )
    if config is not None and config.do_eval and d["eval_batch_default"]:
        add("eval_batch_default", micro=config.per_device_train_batch_size)
    if (
        config is not None
        and (d["world_size"] or 1) > 1
        and d["zero_stage"] is None
        and not config.deepspeed
        and not (log is not None and log.oom_kind == "deepspeed")
    ):
        add("multi_gpu_no_deepspeed", "warning", world=d["world_size"])
    if config is not None and data is not None and data.max_tokens and config.cutoff_len >= data.max_tokens:
        add("cutoff_above_longest", cutoff=config.cutoff_len, longest=data.max_tokens)
    est = facts.estimate
    if est is not None:
        weights = est.terms.get("weights")
        if weights and facts.gpu_total_mib:
            add(
                "weights_share",
                weights=_mib(weights),
                share=round(100 * weights / facts.gpu_total_mib),
                capacity=_mib(facts.gpu_total_mib),
            )
        fitting = _fitting_micro_batch(facts)
        if fitting is not None:
            add("fitting_micro_batch", **fitting)
        if est.dominant_term in est.terms:
            name = TERM_NAMES.get(est.dominant_term, {"en": est.dominant_term, "zh": est.dominant_term})
            out.append(
                Finding(
                    id="dominant_term",
                    text={
                        lang: msg(
                            "f_dominant_term", lang, term=name[lang], mib=_mib(est.terms[est.dominant_term])
                        )
                        for lang in ("en", "zh")
                    },
                )
            )
    if config is not None:
        items = _in_effect(config)
        if items:
            out.append(
                Finding(
                    id="in_effect",
                    text={
                        lang: msg(
                            "f_in_effect",
                            lang,
                            items=("、" if lang == "zh" else ", ").join(i[lang] for i in items),
                        )
                        for lang in ("en", "zh")
                    },
                )
            )
    return out


# Phases where the micro-batch sets the peak, so "the largest micro-batch that fits" is worth saying.
BATCH_PHASES = ("first_batch", "long_sample")


def _fitting_micro_batch(facts: Facts) -> dict[str, Any] | None:
    """The largest micro-batch the estimate says fits this card with margin, keeping the effective batch."""
    config, model, total = facts.config, facts.model, facts.gpu_total_mib
    if facts.derived.get("phase") not in BATCH_PHASES or config is None or model is None or not total:
        return None
    if facts.estimate is None:  # the model's shape did not allow an estimate: nothing to search with
        return None
    from oomdoctor.estimate import accumulation_for, largest_fitting_micro_batch
    from oomdoctor.estimate.search import FIT_MARGIN

    try:
        batch = largest_fitting_micro_batch(config, model, data=facts.data, gpu_total_mib=total)
    except BadInput:  # a model shape too incomplete to estimate with
        return None
    if batch is None or batch >= config.per_device_train_batch_size:
        return None  # none fits, or the current one should: the estimate has nothing to add
    return {
        "batch": batch,
        "accumulation": accumulation_for(config, batch),
        "effective": config.effective_batch,
        "margin": round(100 * FIT_MARGIN),
        "capacity": _mib(total),
    }


def _evidence_cause(facts: Facts) -> str:
    d = facts.derived
    if d["memory_kind"] == "host":
        return "host_ram"
    est = facts.estimate
    if est is not None and d["phase"] in ("first_batch", "long_sample"):
        return {
            "logits_loss": "logits",
            "activations": "activations",
            "weights": "weights",
            "trainable_state": "optimizer_state",
        }.get(est.dominant_term, "activations")
    return CAUSE_BY_PHASE.get(d["phase"], "unknown")


def _facts_summary(facts: Facts) -> dict[str, Any]:
    summary: dict[str, Any] = {"derived": to_jsonable(facts.derived), "gpu_total_mib": facts.gpu_total_mib}
    log = facts.log
    if log is not None:
        summary["log"] = {
            k: to_jsonable(getattr(log, k))
            for k in (
                "path",
                "oom_kind",
                "error_line",
                "phase",
                "phase_evidence",
                "step",
                "total_steps",
                "good_steps",
                "rank",
                "gpu_index",
                "allocated_mib",
                "reserved_mib",
                "alloc_retries",
                "world_size",
            )
        }
    config = facts.config
    if config is not None:
        summary["config"] = {
            k: to_jsonable(getattr(config, k))
            for k in (
                "path",
                "stage",
                "finetuning_type",
                "model_name_or_path",
                "per_device_train_batch_size",
                "per_device_eval_batch_size",
                "gradient_accumulation_steps",
                "cutoff_len",
                "precision",
                "gradient_checkpointing",
                "quantization_bit",
                "deepspeed",
                "zero_stage",
            )
        }
    if facts.data is not None:
        summary["data"] = to_jsonable(facts.data)
    if facts.estimate is not None:
        summary["estimate"] = to_jsonable(facts.estimate)
    return summary


# --- the walk --------------------------------------------------------------------------------------------


@dataclass
class Walk:
    """What the nodes make of one set of facts: the matching proposals in rank order, what is already on,
    and the nodes an unknown fact left undecided."""

    candidates: list[tuple[RuleNode, Proposal, list[Finding]]] = field(default_factory=list)
    already_on: list[dict[str, str]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # guards that held, changes not computable
    undecided: list[LoadedNode] = field(default_factory=list)

    @property
    def proposals(self) -> list[Proposal]:
        return [p for _, p, _ in self.candidates]

    @property
    def top(self) -> str | None:
        return self.candidates[0][1].rule if self.candidates else None


def walk_rules(facts: Facts, rules: RuleSet, *, with_effect: bool = True) -> Walk:
    """Every node located at the phase, in rank order; the fallback nodes only when no other node proposes
    anything (a located GPU OOM always ends with advice). Proposals that would write the very same change
    as a better-ranked one are dropped."""
    walk = Walk()
    phase = facts.derived["phase"]
    for fallback in (False, True):
        if fallback and walk.candidates:
            break
        for loaded in rules:
            node = loaded.node
            if node.fallback is not fallback or phase not in node.locates.phase:
                continue
            _visit(loaded, facts, walk, with_effect)
    walk.candidates.sort(key=lambda item: (item[0].rank, item[0].id))
    kept: list[tuple[RuleNode, Proposal, list[Finding]]] = []
    for item in walk.candidates:
        if not item[1].manual and any(_same_change(item[1], other[1]) for other in kept):
            continue
        kept.append(item)
    walk.candidates = kept
    return walk


def _same_change(a: Proposal, b: Proposal) -> bool:
    return (a.changes, a.env, sorted(a.files)) == (b.changes, b.env, sorted(b.files))


def _visit(loaded: LoadedNode, facts: Facts, walk: Walk, with_effect: bool) -> None:
    node = loaded.node
    matched = evaluate(node.when, facts)
    if matched is None:
        walk.undecided.append(loaded)
        return
    if not matched:
        return
    guard = next((g for g in node.guards if evaluate(g.when, facts) is True), None)
    if guard is not None:
        reason = render(guard.reason, facts, {})
        if reason not in walk.already_on:
            walk.already_on.append(reason)
            walk.findings.append(Finding(id=f"guard.{node.id}", text=reason))
        return
    try:
        proposal, notes = build_proposal(loaded, facts, with_effect=with_effect)
    except ChangeNotComputable as missing:
        walk.findings.append(
            Finding(
                id=f"{node.id}.not_computable",
                text=both("f_change_not_computable", rule=node.id, field=missing.field),
                severity="warning",
            )
        )
        return
    if proposal is not None:
        walk.candidates.append((node, proposal, notes))


def diagnose(facts: Facts, rules: RuleSet | None = None) -> Diagnosis:
    """Locate the OOM and propose one change (the lowest-ranked matching node), with alternatives."""
    rules = rules if rules is not None else load_rules()
    check_answers(facts.answers, rules)
    facts = dataclasses.replace(facts, answers=dict(facts.answers))
    facts.derived = derive(facts)
    d, log = facts.derived, facts.log
    base = {
        "step": log.step if log is not None else None,
        "requested_mib": log.requested_mib if log is not None else None,
        "capacity_mib": (log.capacity_mib if log is not None else None) or facts.gpu_total_mib,
        "free_mib": log.free_mib if log is not None else None,
        "reserved_unallocated_mib": log.reserved_unallocated_mib if log is not None else None,
    }
    findings = fact_findings(facts)
    if not d["oom"]:
        findings.insert(0, Finding(id="no_oom", text=both("f_no_oom")))
        return Diagnosis(
            oom=False,
            phase="none",
            cause="unknown",
            findings=findings,
            answers=dict(facts.answers),
            facts=_facts_summary(facts),
            **base,
        )

    walk = walk_rules(facts, rules)
    findings.extend(walk.findings)
    proposals = walk.proposals
    if walk.candidates:
        findings.extend(walk.candidates[0][2])  # notes about the proposed change itself
    for p in proposals:
        p.already_on = list(walk.already_on)
    proposal = proposals[0] if proposals else None
    return Diagnosis(
        oom=True,
        phase=d["phase"],
        cause=proposal.cause if proposal is not None else _evidence_cause(facts),
        findings=findings,
        proposal=proposal,
        alternatives=proposals[1:],
        questions=choose_questions(facts, rules, walk),
        answers=dict(facts.answers),
        facts=_facts_summary(facts),
        **base,
    )
