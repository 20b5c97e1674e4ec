"""What the facts themselves show, before any rule: the numbers behind the diagnosis, as a table of small
producers. Each producer reads the assembled bundle and returns its findings (most return none or one);
``FACT_FINDINGS`` is the order they are shown in. To add a finding: write a producer, put it in the table,
and its ``f_<id>`` text in ``i18n.MESSAGES``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oomdoctor.diagnosis import Finding
from oomdoctor.errors import BadInput
from oomdoctor.facts.ranks import rank_findings
from oomdoctor.facts.types import ConfigFacts
from oomdoctor.i18n import MESSAGES, Lang, both, msg
from oomdoctor.rules.derive import error_line_missing, evaluation_only
from oomdoctor.rules.facts import BATCH_PHASES, Facts
from oomdoctor.rules.host_report import host_full_at_stop
from oomdoctor.rules.log_stop import log_stop
from oomdoctor.rules.questions import MIB_PER_GB, said_no_oom
from oomdoctor.rules.texts import count_text, mib_text
from oomdoctor.text import Text

Producer = Callable[[Facts], list[Finding]]

# A reserved-but-unallocated block is worth a line from this share of the request on.
FRAGMENTATION_FINDING_SHARE = 0.5


def finding(fid: str, severity: str = "info", /, **fields: Any) -> list[Finding]:
    """One finding whose text is ``f_<fid>`` filled with the same fields in both languages."""
    return [Finding(id=fid, text=both(f"f_{fid}", **fields), severity=severity)]


def per_language(fid: str, fields: Callable[[Lang], dict[str, Any]]) -> list[Finding]:
    """One finding whose fields are themselves texts in the reader's language."""
    return [Finding(id=fid, text=Text.each(lambda lang: msg(f"f_{fid}", lang, **fields(lang))))]


# --- the producers, in the order they are shown -------------------------------------------------------------


def _inputs(facts: Facts) -> list[Finding]:
    if facts.log is None:
        return _no_log(facts)
    return finding("log_only") if facts.config is None else []


def _no_log(facts: Facts) -> list[Finding]:
    """No log: what the config alone placed (evaluation only; weights bigger than the card), else the question
    (nothing where the user said it did not run out of memory: the no-OOM finding says it)."""
    d, est = facts.derived, facts.estimate
    if said_no_oom(facts.answers):
        return []
    if d.phase_source == "config":
        return finding("no_log_config_phase", card=mib_text(d.capacity_mib))
    if facts.config is not None and evaluation_only(facts.config) and d.phase == "unknown":
        return finding("no_log_config_load_or_eval")
    if d.phase_source == "weights_size" and est is not None:
        return finding(
            "no_log_weights_exceed", weights=mib_text(est.terms.get("weights")), card=mib_text(d.capacity_mib)
        )
    if d.phase_source == "weights_size_any_card" and est is not None:
        from oomdoctor.estimate.cards import largest_card

        card = largest_card()
        return finding(
            "no_log_weights_exceed_any_card",
            weights=mib_text(est.terms.get("weights")),
            card=card.name,
            card_mib=mib_text(card.total_mib),
        )
    if d.phase_source == "answer":
        # placed by the user's word: what is still open is which memory ran out, or nothing
        return finding("no_log_memory_open" if d.memory_kind_source is None else "no_log_answered")
    return finding("no_log")


def _traceback_cut(facts: Facts) -> list[Finding]:
    if error_line_missing(facts):
        return finding("traceback_cut" if facts.derived.oom else "no_error_line", "warning")
    return []


def _log_stop(facts: Facts) -> list[Finding]:
    """A log with no error line that stops while a run is under way: where, and what the config runs next."""
    stop = log_stop(facts.config, facts.log)
    if stop is None:
        return []
    known = stop.step is not None and stop.total is not None
    fid = f"log_stops_{stop.where}" if known or stop.where in ("load", "save") else "log_stops_steps_unknown"
    out = finding(fid, "warning", step=stop.step, total=stop.total)
    if stop.next_kind is not None:
        out += per_language(
            "log_stops_next",
            lambda lang: {"what": msg(f"phase_{stop.next_kind}", lang), "at": stop.next_step},
        )
    return out


def _host_ram_report(facts: Facts) -> list[Finding]:
    """The run's own report of the host's RAM, full where the log stops (rules/host_report.py)."""
    log = facts.log
    if log is None or log.host_ram_percent is None or not host_full_at_stop(facts):
        return []
    used = f"{log.host_ram_used_gib:g} GB" if log.host_ram_used_gib is not None else "?"
    return finding("host_ram_report", "warning", percent=f"{log.host_ram_percent:g}", used=used)


def _ranks(facts: Facts) -> list[Finding]:
    """A multi-rank log: who ran out first, and whether the others did too or were torn down (facts/ranks.py)."""
    log = facts.log
    out: list[Finding] = []
    for fid, fields in rank_findings(log.ranks if log is not None else None):
        out += finding(fid, "info", **fields)
    return out


def _other_error(facts: Facts) -> list[Finding]:
    log = facts.log
    if log is not None and not log.oom and log.other_error:
        return finding("other_error", "warning", error=log.other_error[:300])
    return []


def _phase_answer_over_log(facts: Facts) -> list[Finding]:
    d, log = facts.derived, facts.log
    if d.phase_source != "answer" or log is None or not log.oom or log.phase in ("unknown", "none", d.phase):
        return []
    return finding("phase_answer_over_log", answer=d.phase, log=log.phase)


def _phase_evidence(facts: Facts) -> list[Finding]:
    d, log = facts.derived, facts.log
    if log is None or d.phase_source != "log" or not (log.phase_evidence_text or log.phase_evidence):
        return []
    evidence = log.phase_evidence_text or [Text(en=e, zh=e) for e in log.phase_evidence]
    return per_language(
        "phase_evidence",
        lambda lang: {
            "phase": msg(f"phase_{d.phase}", lang),
            "evidence": "; ".join(e.get(lang) or e.get("en", "") for e in evidence[:3]),
        },
    )


def _phase_by_logits_size(facts: Facts) -> list[Finding]:
    d, log = facts.derived, facts.log
    if log is None or d.phase_source != "logits_size":
        return []
    return per_language(
        "phase_by_logits_size",
        lambda lang: {"phase": msg(f"phase_{d.phase}", lang), "request": mib_text(log.requested_mib)},
    )


def _phase_by_schedule(facts: Facts) -> list[Finding]:
    d, log = facts.derived, facts.log
    if log is None or d.phase_source != "schedule":
        return []
    return per_language(
        "phase_by_schedule", lambda lang: {"phase": msg(f"phase_{d.phase}", lang), "step": log.step}
    )


def _request(facts: Facts) -> list[Finding]:
    log = facts.log
    if log is None or log.requested_mib is None or log.capacity_mib is None:
        return []
    return finding(
        "request",
        requested=mib_text(log.requested_mib),
        free=mib_text(log.free_mib),
        capacity=mib_text(log.capacity_mib),
    )


def _card_answered(facts: Facts) -> list[Finding]:
    """The card's size came from the user's answer (no file said it): the report says so."""
    d = facts.derived
    if d.capacity_source != "answer":
        return []
    gb = f"{(d.capacity_mib or 0.0) / MIB_PER_GB:.1f}".removesuffix(".0")
    return finding("card_answered", gb=gb, mib=mib_text(d.capacity_mib))


def _reserve_would_fit(facts: Facts) -> list[Finding]:
    log = facts.log
    if log is None or not facts.derived.reserve_would_fit or not log.reserved_unallocated_mib:
        return []
    if (
        not log.requested_mib
        or log.reserved_unallocated_mib < FRAGMENTATION_FINDING_SHARE * log.requested_mib
    ):
        return []
    return finding(
        "reserve_would_fit",
        "warning",
        free=mib_text(log.free_mib),
        reserved=mib_text(log.reserved_unallocated_mib),
        requested=mib_text(log.requested_mib),
    )


def _alloc_retries(facts: Facts) -> list[Finding]:
    log = facts.log
    return (
        finding("alloc_retries", "warning", count=log.alloc_retries)
        if log is not None and log.alloc_retries
        else []
    )


def _self_listed(facts: Facts) -> list[Finding]:
    pid = facts.derived.self_listed_pid
    return finding("self_listed", pid=pid) if pid is not None else []


def _other_processes(facts: Facts) -> list[Finding]:
    d = facts.derived
    if not d.other_process_mib:
        return []
    if d.other_process_whose == "own_ranks":
        pids = ", ".join(str(p) for p in d.other_process_pids)
        world = d.world_size
        return finding(
            "own_ranks_on_card", "warning", mib=mib_text(d.other_process_mib), pids=pids, world=world
        )
    if not d.other_process_pids and d.other_process_whose == "unclear":
        return finding("outside_unclear", "warning", mib=mib_text(d.other_process_mib))
    pids = ", ".join(str(p) for p in d.other_process_pids)
    return finding("other_processes", "warning", mib=mib_text(d.other_process_mib), pids=pids)


def _effective_batch(facts: Facts) -> list[Finding]:
    d = facts.derived
    if not (d.micro_batch and d.accumulation and d.effective_batch):
        return []
    return finding(
        "effective_batch",
        micro=d.micro_batch,
        acc=d.accumulation,
        world=d.world_size or 1,
        effective=d.effective_batch,
    )


def _effective_batch_unknown_world(facts: Facts) -> list[Finding]:
    """Several processes proven (a rank's number) but not counted: the batch per process is what is known."""
    d = facts.derived
    if not (d.micro_batch and d.accumulation) or d.effective_batch is not None or d.world_size is not None:
        return []
    if (d.processes_at_least or 1) <= 1:
        return []
    return finding(
        "effective_batch_unknown_world",
        micro=d.micro_batch,
        acc=d.accumulation,
        per_process=d.micro_batch * d.accumulation,
        at_least=d.processes_at_least,
    )


def _eval_batch_default(facts: Facts) -> list[Finding]:
    config = facts.config
    if config is None or not config.do_eval or not facts.derived.eval_batch_default:
        return []
    return finding("eval_batch_default", micro=config.per_device_train_batch_size)


def _cpu_compute(facts: Facts) -> list[Finding]:
    """PyTorch's CPU allocator failed in the model's compute: the run trains on the CPU, so its batch lives in
    host RAM (often by accident: no CUDA device was visible)."""
    log = facts.log
    if log is None or not log.cpu_compute:
        return []
    return finding("cpu_compute", "warning")


def _data_parallel(facts: Facts) -> list[Finding]:
    """One process over several GPUs (torch.nn.DataParallel, facts/log_data_parallel.py): GPU 0 gathers."""
    log = facts.log
    if log is None or not log.data_parallel:
        return []
    gpus = log.data_parallel_gpus
    return finding("data_parallel", "warning", gpus=gpus if gpus is not None else "?")


def _multi_gpu_no_deepspeed(facts: Facts) -> list[Finding]:
    d = facts.derived
    stated, at_least = _processes_shown(facts)
    if facts.config is None or max(stated or 1, at_least or 1) <= 1 or d.sharded_by != "none":
        return []
    if facts.log is not None and facts.log.data_parallel:
        return []  # one process, not several: said by _data_parallel
    if stated is not None:
        return finding("multi_gpu_no_deepspeed", "warning", world=stated)
    text = both("f_multi_gpu_no_deepspeed_at_least", at_least=at_least)
    return [Finding(id="multi_gpu_no_deepspeed", text=text, severity="warning")]


def _processes_shown(facts: Facts) -> tuple[int | None, int | None]:
    """(the training processes, as the assembled world size states them; a lower bound where only a rank is
    seen): a ``[rank3]`` is one of four or more, never "four". A ``GPU N`` in the message is only a device
    index: one process may use several cards (``device_map``), so it bounds nothing here."""
    d, log = facts.derived, facts.log
    if d.world_size is not None:
        return d.world_size, None
    return None, (log.rank + 1 if log is not None and log.rank is not None else None)


def _cutoff_above_longest(facts: Facts) -> list[Finding]:
    config, data = facts.config, facts.data
    if config is None or data is None or not data.max_tokens or config.cutoff_len < data.max_tokens:
        return []
    return finding("cutoff_above_longest", cutoff=config.cutoff_len, longest=data.max_tokens)


def _weights_share(facts: Facts) -> list[Finding]:
    est, capacity = facts.estimate, facts.derived.capacity_mib
    weights = est.terms.get("weights") if est is not None else None
    if not weights or not capacity:
        return []
    return finding(
        "weights_share",
        weights=mib_text(weights),
        share=round(100 * weights / capacity),
        capacity=mib_text(capacity),
    )


def _fitting_micro_batch(facts: Facts) -> list[Finding]:
    """The largest micro-batch the estimate says fits this card with margin, keeping the effective batch."""
    config, model, total = facts.config, facts.model, facts.derived.capacity_mib
    if facts.derived.phase not in BATCH_PHASES or config is None or model is None or not total:
        return []
    if facts.estimate is None:  # the model's shape did not allow an estimate: nothing to search with
        return []
    from oomdoctor.estimate import accumulation_for, largest_fitting_micro_batch
    from oomdoctor.estimate.search import FIT_MARGIN

    try:
        batch = largest_fitting_micro_batch(config, model, data=facts.data, gpu_total_mib=total,
                                            calibration=facts.calibration())  # fmt: skip
    except BadInput:  # a model shape too incomplete to estimate with
        return []
    if batch is None or batch >= config.per_device_train_batch_size:
        return []  # none fits, or the current one should: the estimate has nothing to add
    return finding(
        "fitting_micro_batch",
        batch=batch,
        accumulation=accumulation_for(config, batch),
        effective=facts.derived.effective_batch or "?",
        margin=round(100 * FIT_MARGIN),
        capacity=mib_text(total),
    )


def _dominant_by_world(facts: Facts) -> list[Finding]:
    """The estimate's largest term differs between the world sizes a ZeRO run may have: the conflict said."""
    by_world = facts.derived.dominant_by_world
    if len(by_world) < 2:
        return []
    (low_world, low), (high_world, high) = by_world[0], by_world[-1]
    return finding(
        "dominant_by_world",
        low_world=low_world,
        low=_term_name(low),
        high_world=high_world,
        high=_term_name(high),
    )


def _term_name(term: str) -> Text:
    """The term's one name, the same in every view (catalogue: shared term_<term>)."""
    return both(f"term_{term}") if f"term_{term}" in MESSAGES else Text(en=term, zh=term)


def _dominant_term(facts: Facts) -> list[Finding]:
    est = facts.estimate
    if est is None or est.dominant_term not in est.terms:
        return []
    term = est.dominant_term
    return finding("dominant_term", term=_term_name(term), mib=mib_text(est.terms[term]))


# Stages whose micro-batch holds two sequences a sample (chosen and rejected, or a pair for the reward model).
PAIR_STAGES = frozenset({"dpo", "kto", "rm"})


def _logits_likely(facts: Facts) -> list[Finding]:
    """Where it ran out is still open and the estimate's largest term is the loss's logits: named as the likely
    cause of a training-step OOM (chosen and rejected together for a pairwise stage), beside the question."""
    est, config = facts.estimate, facts.config
    if facts.derived.phase != "unknown" or est is None or config is None:
        return []
    if est.dominant_term != "logits_loss" or not est.terms.get("logits_loss"):
        return []
    pairs = (config.stage or "sft").lower() in PAIR_STAGES
    return finding(
        "logits_likely_pairs" if pairs else "logits_likely",
        mib=mib_text(est.terms["logits_loss"]),
        cutoff=config.cutoff_len,
    )


def _vision_tokens(facts: Facts) -> list[Finding]:
    """A multimodal run: the tokens and vision-tower patches one image (and one video) becomes, against the cutoff."""
    from oomdoctor.estimate.vision import vision_tokens

    config = facts.config
    vt = vision_tokens(config, facts.model)
    if config is None or vt is None:
        return []
    trained = not config.freeze_vision_tower

    def fields(lang: Lang) -> dict[str, Any]:
        extra = []
        if trained:
            extra.append(msg("f_vision_trained", lang))
        if vt.image_tokens > config.cutoff_len:
            extra.append(msg("f_vision_over_cutoff", lang, cutoff=config.cutoff_len))
        if vt.video_tokens is not None:
            extra.append(
                msg("f_vision_video", lang, tokens=count_text(vt.video_tokens), frames=vt.video_frames)
            )
        return {
            "pixels": count_text(vt.image_pixels),
            "tokens": count_text(vt.image_tokens),
            "patches": count_text(vt.image_tokens * 4),
            "more": "".join(extra),
        }

    if vt.pixels_key == "image_max_pixels":
        return per_language("vision_tokens", fields)
    # the older key (LLaMA-Factory before 0.9.2) names the same limit
    text = Text.each(lambda lang: msg("f_vision_tokens_resolution", lang, **fields(lang)))
    return [Finding(id="vision_tokens", text=text)]


def in_effect(config: ConfigFacts) -> list[tuple[frozenset[str], Text]]:
    """What the config already turns on (gradient checkpointing, precision, quantisation, ZeRO, offload), each
    item with the fact paths that say it is on: a guard that held on one of them says it already."""
    items: list[tuple[frozenset[str], Text]] = []

    def add(paths: tuple[str, ...], key: str, **fields: Any) -> None:
        items.append((frozenset(paths), both(key, **fields)))

    if config.gradient_checkpointing:
        add(
            ("config.gradient_checkpointing",),
            "in_gc_default" if config.gradient_checkpointing_by_default else "in_gc",
        )
    if config.pure_bf16:
        add(("config.pure_bf16",), "in_pure_bf16")
    elif config.bf16:
        add(("config.bf16",), "in_bf16")
    elif config.fp16:
        add(("config.fp16",), "in_fp16")
    if config.enable_liger_kernel:
        add(("config.enable_liger_kernel",), "in_liger")
    if config.quantization_bit:
        add(("config.quantization_bit",), "in_quant", bits=config.quantization_bit)
    if config.zero_stage is not None:
        add(("config.zero_stage", "derived.zero_stage"), "in_zero", stage=config.zero_stage)
    if config.offload_optimizer:
        add(("config.offload_optimizer",), "in_offload_optimizer")
    if config.offload_param:
        add(("config.offload_param",), "in_offload_param")
    return items


def _in_effect(facts: Facts, *, said: frozenset[str] = frozenset()) -> list[Finding]:
    """The finding on what is already on, less the items whose facts ``said`` names."""
    items = [text for paths, text in in_effect(facts.config) if not paths & said] if facts.config else []
    if not items:
        return []
    return per_language(
        "in_effect", lambda lang: {"items": msg("list_sep", lang).join(i[lang] for i in items)}
    )


def without_guarded(findings: list[Finding], facts: Facts, guarded: frozenset[str]) -> list[Finding]:
    """``findings`` with the in-effect one restated without what a guard that held already says (a guard's
    reason is each proposal's "Already on": gradient checkpointing named there is not named again here)."""
    out: list[Finding] = []
    for item in findings:
        out += _in_effect(facts, said=guarded) if item.id == "in_effect" else [item]
    return out


FACT_FINDINGS: tuple[Producer, ...] = (
    _inputs,
    _traceback_cut,
    _log_stop,
    _host_ram_report,
    _ranks,
    _other_error,
    _phase_answer_over_log,
    _phase_evidence,
    _phase_by_schedule,
    _phase_by_logits_size,
    _request,
    _card_answered,
    _reserve_would_fit,
    _alloc_retries,
    _self_listed,
    _other_processes,
    _effective_batch,
    _effective_batch_unknown_world,
    _eval_batch_default,
    _cpu_compute,
    _data_parallel,
    _multi_gpu_no_deepspeed,
    _cutoff_above_longest,
    _weights_share,
    _fitting_micro_batch,
    _dominant_term,
    _dominant_by_world,
    _logits_likely,
    _vision_tokens,
    _in_effect,
)


def fact_findings(facts: Facts) -> list[Finding]:
    """Every producer's findings, in the table's order."""
    return [f for produce in FACT_FINDINGS for f in produce(facts)]
