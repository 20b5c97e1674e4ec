"""Turn facts and proposals into the lines the TUI shows. Pure functions, no textual, no I/O.

Everything here formats what the core decided; nothing decides anything. Kept apart from the widgets so
the wording is unit-tested without running an app.
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.i18n import Lang, msg, pick
from oomdoctor.report import units
from oomdoctor.tui.strings import TEXTS, t

if TYPE_CHECKING:
    from oomdoctor.diagnosis import Diagnosis, EstimatedEffect, Proposal
    from oomdoctor.facts.types import ConfigFacts, DataFacts
    from oomdoctor.rules.facts import Derived, Facts


# The app's sizes are report.units' with the app's word for an unknown value.
def fmt_mib(mib: float | None, lang: Lang = "en") -> str:
    """``512 MiB`` below a GiB, ``2.00 GiB`` above: how the OOM message itself writes sizes."""
    return units.size(mib, missing=t("value_na", lang))


def fmt_gib(mib: float | None, lang: Lang = "en") -> str:
    """Always GiB (``0.41 GiB``): for a screen that shows every size in one unit."""
    return units.gib(mib, missing=t("value_na", lang))


def fmt_count(n: int | None, lang: Lang = "en") -> str:
    """``596049920`` -> ``596M``; ``7615616512`` -> ``7.6B``."""
    return units.count(n, missing=t("value_na", lang))


def listing(parts: list[str], lang: Lang) -> str:
    """Parts of one value joined as each language writes a list (``a, b`` / ``a,b``)."""
    return ("," if lang == "zh" else ", ").join(parts)


def aside(text: str, lang: Lang) -> str:
    """A parenthetical after a value: `` (fits)`` / ``(放得下)`` with full-width brackets."""
    return f"({text})" if lang == "zh" else f" ({text})"


def yaml_scalar(value: Any) -> str:
    """How a value reads in a LLaMA-Factory YAML (``true``, ``null``, ``2``, ``ds_z3.json``)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return str(value)


def phase_name(phase: str, lang: Lang) -> str:
    key = f"phase_{phase}"
    return t(key, lang) if key in TEXTS else phase


def cause_name(cause: str, lang: Lang) -> str:
    key = f"cause_{cause}"
    return t(key, lang) if key in TEXTS else cause


def term_name(term: str, lang: Lang) -> str:
    key = f"term_{term}"
    return t(key, lang) if key in TEXTS else term


def oom_summary(diagnosis: Diagnosis | None, facts: Facts | None, lang: Lang, *, short: bool = False) -> str:
    """Where memory ran out, what filled it, and the numbers from the OOM message (``short``: without the
    reserved-but-unallocated figure, for the banner). A log with no error line (a traceback cut before it, a
    run that stops) says so, as the report's first line does, never "no OOM"."""
    if facts is not None and facts.log is None:
        return t("oom_no_log", lang)
    if diagnosis is None or not diagnosis.oom:
        ids = [f.id for f in diagnosis.findings] if diagnosis is not None else []
        if "no_error_line" in ids:
            return msg("r_no_error_line", lang)
        if any(i.startswith("log_stops_") for i in ids):
            return msg("r_log_stops", lang)
        return t("oom_none", lang)
    parts = [t("oom_at", lang, phase=phase_name(diagnosis.phase, lang))]
    if diagnosis.step is not None:
        total = facts.log.total_steps if facts is not None and facts.log is not None else None
        parts.append(
            t("oom_step_of", lang, step=diagnosis.step, total=total)
            if total
            else t("oom_step", lang, step=diagnosis.step)
        )
    if diagnosis.cause and diagnosis.cause != "unknown":
        parts.append(t("oom_filled_by", lang, cause=cause_name(diagnosis.cause, lang)))
    if diagnosis.requested_mib is not None:
        if diagnosis.free_mib is not None and diagnosis.capacity_mib is not None:
            parts.append(
                t(
                    "oom_requested",
                    lang,
                    requested=fmt_mib(diagnosis.requested_mib, lang),
                    free=fmt_mib(diagnosis.free_mib, lang),
                    capacity=fmt_mib(diagnosis.capacity_mib, lang),
                )
            )
        else:
            parts.append(t("oom_requested_short", lang, requested=fmt_mib(diagnosis.requested_mib, lang)))
    if diagnosis.reserved_unallocated_mib and not short:
        parts.append(t("oom_reserved", lang, reserved=fmt_mib(diagnosis.reserved_unallocated_mib, lang)))
    return "; ".join(parts) if lang == "en" else ";".join(parts)


def facts_rows(
    facts: Facts | None, diagnosis: Diagnosis | None, lang: Lang, *, gpu_reason: str | None = None
) -> list[tuple[str, str]]:
    """(label, value) rows of the facts view: the config as LLaMA-Factory will run it, the GPU, the OOM.
    ``gpu_reason``: why there is no GPU in ``lang``, when the GPU source can say it in one language."""
    rows = config_rows(facts, lang)
    rows.append((t("facts_gpu", lang), gpu_line(facts, lang, reason=gpu_reason)))
    rows += oom_rows(facts, diagnosis, lang)
    rows += estimate_rows(facts, diagnosis, lang)
    return rows


def config_rows(facts: Facts | None, lang: Lang) -> list[tuple[str, str]]:
    """The config's rows, as LLaMA-Factory will run it: one row per setting that shapes the memory."""
    if facts is None or facts.config is None:
        return [(t("facts_model", lang), t("facts_no_config", lang))]
    cfg = facts.config
    return [
        (t("facts_model", lang), model_value(facts, lang)),
        (t("facts_method", lang), method_value(cfg, lang)),
        (t("facts_batch", lang), batch_value(cfg, facts.derived, lang)),
        (t("facts_sequence", lang), sequence_value(cfg, facts.data, lang)),
        (t("facts_precision", lang), cfg.precision),
        (t("facts_checkpointing", lang), checkpointing_value(cfg, lang)),
        (t("facts_quantization", lang), quantization_value(cfg, lang)),
        (t("facts_deepspeed", lang), deepspeed_value(cfg, lang)),
        (t("facts_eval", lang), eval_value(cfg, lang)),
    ]


def model_value(facts: Facts, lang: Lang) -> str:
    """The model's name, with its parameter count when the shape is known."""
    model = (facts.config.model_name_or_path if facts.config else None) or t("facts_unknown", lang)
    params = facts.model.params if facts.model is not None else None
    if params:
        model += aside(t("facts_params", lang, params=fmt_count(params, lang)), lang)
    return model


def method_value(cfg: ConfigFacts, lang: Lang) -> str:
    """The fine-tuning method (QLoRA named as such), with the stage when it is not plain SFT."""
    if cfg.finetuning_type == "lora" and cfg.quantization_bit:
        method = t("facts_method_qlora", lang, bits=cfg.quantization_bit)
    else:
        method = cfg.finetuning_type
    if cfg.stage and cfg.stage != "sft":
        method = listing([method, t("facts_stage", lang, stage=cfg.stage)], lang)
    return method


def batch_value(cfg: ConfigFacts, run: Derived, lang: Lang) -> str:
    """Micro batch x accumulation (x GPUs when several processes run) = the effective batch, as assembled:
    a world size nobody stated shows as its lower bound."""
    several = (run.processes_at_least or 1) > 1
    gpus = run.world_size if run.world_size else f"≥{run.processes_at_least}"
    effective = run.effective_batch if run.effective_batch is not None else "?"
    return t(
        "facts_batch_value_gpus" if several else "facts_batch_value",
        lang,
        micro=cfg.per_device_train_batch_size,
        accum=cfg.gradient_accumulation_steps,
        gpus=gpus,
        effective=effective,
    )


def sequence_value(cfg: ConfigFacts, data: DataFacts | None, lang: Lang) -> str:
    """cutoff_len, with the real lengths when they are known (measured or given), and packing."""
    seq = [t("facts_cutoff", lang, cutoff=cfg.cutoff_len)]
    if data is not None and data.max_tokens:
        seq += real_lengths(data, lang)
    else:
        seq.append(t("facts_longest_unknown", lang))
    if cfg.packing:
        seq.append(t("facts_packing", lang))
    return listing(seq, lang)


def real_lengths(data: DataFacts, lang: Lang) -> list[str]:
    """The longest sample (marked when measured), its 99th percentile and how many samples are cut."""
    longest = t("facts_longest", lang, tokens=data.max_tokens)
    if data.source == "tokenized":
        longest += aside(t("facts_measured", lang), lang)
    parts = [longest]
    if data.p99_tokens:
        parts.append(t("facts_p99", lang, tokens=data.p99_tokens))
    if data.truncated:
        parts.append(t("facts_truncated", lang, count=data.truncated))
    return parts


def checkpointing_value(cfg: ConfigFacts, lang: Lang) -> str:
    """Gradient checkpointing on (saying when it is LLaMA-Factory's default) or off."""
    if not cfg.gradient_checkpointing:
        return t("facts_off", lang)
    return t("facts_on_default", lang) if cfg.gradient_checkpointing_by_default else t("facts_on", lang)


def quantization_value(cfg: ConfigFacts, lang: Lang) -> str:
    """The quantization's bits, type and method, or none."""
    if not cfg.quantization_bit:
        return t("facts_none", lang)
    return t(
        "facts_quant_value",
        lang,
        bits=cfg.quantization_bit,
        qtype=cfg.quantization_type,
        method=cfg.quantization_method,
    )


def deepspeed_value(cfg: ConfigFacts, lang: Lang) -> str:
    """The DeepSpeed config: none, a file that is not there, or its ZeRO stage and offloads."""
    if cfg.deepspeed is None:
        return t("facts_none", lang)
    if not cfg.deepspeed_found:
        return t("facts_ds_missing", lang, path=cfg.deepspeed)
    parts = [t("facts_zero", lang, stage=cfg.zero_stage if cfg.zero_stage is not None else "?")]
    if cfg.offload_optimizer:
        parts.append(t("facts_offload_optimizer", lang))
    if cfg.offload_param:
        parts.append(t("facts_offload_param", lang))
    return listing(parts, lang)


def eval_value(cfg: ConfigFacts, lang: Lang) -> str:
    """The eval batch (LLaMA-Factory's default when unset) and when evaluation runs."""
    if cfg.per_device_eval_batch_size_set:
        eval_batch = str(cfg.per_device_eval_batch_size)
    else:
        eval_batch = t("facts_eval_default", lang, batch=cfg.per_device_eval_batch_size)
    if not cfg.do_eval:
        eval_when = t("facts_eval_off", lang)
    elif cfg.eval_steps:
        eval_when = t("facts_eval_every", lang, steps=cfg.eval_steps)
    else:
        eval_when = t("facts_eval_on", lang)
    return listing([eval_batch, eval_when], lang)


def oom_rows(facts: Facts | None, diagnosis: Diagnosis | None, lang: Lang) -> list[tuple[str, str]]:
    """The OOM in one line, and the OOM message read as an account of the card when it gives one."""
    if diagnosis is None and facts is not None and facts.log is not None:
        rows = [(t("facts_oom", lang), "…")]  # read, not yet diagnosed: say nothing rather than "no OOM"
    else:
        rows = [(t("facts_oom", lang), oom_summary(diagnosis, facts, lang))]
    if diagnosis is not None and diagnosis.account is not None:
        rows.append((t("facts_account", lang), pick(diagnosis.account["line"], lang)))
    return rows


def estimate_rows(facts: Facts | None, diagnosis: Diagnosis | None, lang: Lang) -> list[tuple[str, str]]:
    """The estimate's peak, nvidia-smi band and dominant term, whether it fits, and what it assumed."""
    est = facts.estimate if facts is not None else None
    if facts is None or est is None:
        return []
    card_mib = est.gpu_total_mib or facts.capacity_mib
    value = t(
        "facts_estimate_value",
        lang,
        peak=fmt_mib(est.peak_allocated_mib, lang),
        band=nvidia_smi_band(est.expected_nvidia_smi_mib, card_mib, lang),
        term=term_name(est.dominant_term, lang),
    )
    if est.fits is not None:
        value += aside(t(fits_key(est.fits, diagnosis is not None and diagnosis.oom), lang), lang)
    rows = [(t("facts_estimate", lang), value)]
    assumed = estimate_assumption(est, facts, lang)
    if assumed:
        rows.append((t("facts_estimate_assumed_label", lang), assumed))
    return rows


def fits_key(fits: bool, ran_out: bool) -> str:
    """Whether the estimate fits; "fits" under an out-of-memory banner would contradict it: say why the
    two differ."""
    if fits:
        return "facts_fits_yet_ran_out" if ran_out else "facts_fits"
    return "facts_does_not_fit"


def estimate_assumption(est: Any, facts: Facts | None, lang: Lang) -> str | None:
    """What the estimate took for the sequence length when the real lengths are unknown: every sample
    padded to cutoff_len (press m to measure)."""
    if getattr(est, "padded_len_source", None) != "cutoff_len":
        return None
    can_measure = facts is not None and facts.config is not None
    key = "facts_estimate_assumed_measure" if can_measure else "facts_estimate_assumed"
    return t(key, lang, cutoff=est.padded_len)


def nvidia_smi_band(band_mib: tuple[float, float], card_mib: float | None, lang: Lang) -> str:
    """What nvidia-smi would show: the estimator's band, with its high end capped at the card (the caching
    allocator may keep reserving until the card is full, but nvidia-smi never shows more than the card).
    The estimator's own numbers stay as they are; only the display is capped."""
    low, high = band_mib
    if card_mib is None or card_mib <= 0 or high <= card_mib:
        return t("facts_band", lang, low=fmt_mib(low, lang), high=fmt_mib(high, lang))
    if low >= card_mib:
        return t("facts_band_over", lang, total=fmt_mib(card_mib, lang))
    return t("facts_band_capped", lang, low=fmt_mib(low, lang), total=fmt_mib(card_mib, lang))


def gpu_line(facts: Facts | None, lang: Lang, *, reason: str | None = None) -> str:
    """The card, or why there is none: ``reason`` in ``lang`` when given, else ``GpuFacts.reason`` (which
    holds both languages, for JSON)."""
    gpu = facts.gpu if facts is not None else None
    if gpu is None or not gpu.available or gpu.first is None:
        reason = reason or (gpu.reason if gpu is not None else None)
        return t("facts_no_gpu_reason", lang, reason=reason) if reason else t("facts_no_gpu", lang)
    dev = gpu.first
    parts = [t("facts_gpu_value", lang, name=dev.name, total=fmt_mib(dev.total_mib, lang))]
    if dev.bf16_supported is not None:
        parts.append(t("facts_bf16_yes" if dev.bf16_supported else "facts_bf16_no", lang))
    if dev.processes:
        used = sum(p.used_mib or 0.0 for p in dev.processes)
        parts.append(t("facts_gpu_others", lang, count=len(dev.processes), used=fmt_mib(used, lang)))
    if len(gpu.devices) > 1:
        parts.append(t("facts_gpu_more", lang, count=len(gpu.devices) - 1))
    return listing(parts, lang)


@dataclass(frozen=True)
class DiffLine:
    sign: str  # "-" old, "+" new
    text: str


def diff_lines(proposal: Proposal, lang: Lang) -> list[DiffLine]:
    """The proposal's ``{field: [old, new]}`` (and env, extra files) as a config diff."""
    lines: list[DiffLine] = []
    for field_name, (old, new) in proposal.changes.items():
        if old is not None:
            lines.append(DiffLine("-", f"{field_name}: {yaml_scalar(old)}"))
        if new is None:
            lines.append(DiffLine("+", f"# {field_name} {t('proposal_removed', lang)}"))
        else:
            lines.append(DiffLine("+", f"{field_name}: {yaml_scalar(new)}"))
    for name, value in proposal.env.items():
        lines.append(DiffLine("+", f"{t('proposal_env', lang)}: {name}={value}"))
    for name in proposal.files:
        lines.append(DiffLine("+", f"{t('proposal_file', lang)}: {name}"))
    return lines


def effect_line(effect: EstimatedEffect | None, lang: Lang) -> str | None:
    if effect is None or (effect.before_mib is None and effect.after_mib is None):
        return None
    text = t(
        "proposal_effect_value",
        lang,
        before=fmt_mib(effect.before_mib, lang),
        after=fmt_mib(effect.after_mib, lang),
    )
    if effect.fits_after is not None:
        text += aside(
            t("proposal_effect_fits" if effect.fits_after else "proposal_effect_no_fit", lang), lang
        )
    if effect.note:
        text += f" {pick(effect.note, lang)}"
    return text


def change_summary(changes: dict[str, list[Any]]) -> str:
    """``per_device_train_batch_size 4→2, gradient_accumulation_steps 8→16`` for the history table."""
    parts = []
    for field_name, (old, new) in changes.items():
        parts.append(f"{field_name} {yaml_scalar(old)}→{yaml_scalar(new)}")
    return ", ".join(parts)


def proposals_of(diagnosis: Diagnosis | None) -> list[Proposal]:
    """The main proposal first, then the alternatives that also matched: what ``n`` cycles through."""
    if diagnosis is None or diagnosis.proposal is None:
        return []
    return [diagnosis.proposal, *diagnosis.alternatives]


def display_command(command: str, cwd: str | Path) -> str:
    """The command as typed from ``cwd``: absolute paths under ``cwd`` shortened to relative ones.

    Only when the command runs where the user is (no leading ``cd``); otherwise it is shown as written.
    The clipboard always gets the core's command unchanged.
    """
    if command.startswith("cd "):
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    base = Path(cwd).resolve()
    out = []
    for word in words:
        p = Path(word)
        if p.is_absolute():
            with contextlib.suppress(ValueError, OSError):
                word = str(p.resolve().relative_to(base))
        out.append(word)
    return shlex.join(out)


def busiest_reading(snapshot: Any) -> Any:
    """The device to chart: the one using the most memory now (the one that will run out first)."""
    if snapshot is None or not snapshot.readings:
        return None
    return max(snapshot.readings, key=lambda r: r.memory_used_mib)


def trial_outcome_line(feed: Any, lang: Lang) -> str:
    """``Finished: trial passed, peak 3.20 GiB, 41 s`` from the trial's result.json record."""
    outcome = t(f"outcome_{feed.outcome}", lang) if f"outcome_{feed.outcome}" in TEXTS else str(feed.outcome)
    if feed.result is None:
        return f"{outcome}: {feed.error}" if feed.error else outcome
    wall = feed.result.record.get("wall_s")
    return t(
        "trial_finished",
        lang,
        outcome=outcome,
        peak=fmt_gib(feed.result.peak_memory_mib, lang),  # the trial screen's one unit
        wall=units.number(wall if isinstance(wall, int | float) else None, missing="?"),
    )
