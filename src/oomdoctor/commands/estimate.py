"""``oomdoctor estimate``: peak GPU memory per term and phase, and the band nvidia-smi should show.

The card comes from ``--gpu NAME`` (a small table), ``--gpu-mib N``, or NVML when a GPU is visible. The
longest sample comes from ``--longest-tokens`` (``oomdoctor lengths`` prints it); without it the estimate
pads every batch to cutoff_len and says so.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from oomdoctor.commands._inputs import add_json, add_lengths, positive_number
from oomdoctor.errors import EXIT_OK
from oomdoctor.i18n import Lang, help_text, msg

if TYPE_CHECKING:
    from oomdoctor.estimate.types import Estimate
    from oomdoctor.facts.types import ConfigFacts, ModelFacts


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        required=True,
        help=help_text("help_estimate_config"),
    )
    add_lengths(parser)
    card = parser.add_mutually_exclusive_group()
    card.add_argument(
        "--gpu-mib",
        type=positive_number,
        metavar="N",
        help=help_text("help_estimate_gpu_mib"),
    )
    card.add_argument(
        "--gpu",
        metavar="NAME",
        help=help_text("help_estimate_gpu"),
    )
    parser.add_argument(
        "--no-calibration",
        action="store_true",
        help=help_text("help_estimate_no_calibration"),
    )
    add_json(parser)


def calibration_card(card_name: str | None) -> str | None:
    """The card a calibration is looked up for: the named card, else this machine's host memory when no
    NVIDIA GPU is visible (a CPU trial calibrates the RSS); None when a GPU is there but unnamed."""
    if card_name:
        return card_name
    from oomdoctor.estimate.calibrate import HOST_CARD
    from oomdoctor.facts.gpu import read_gpu

    return HOST_CARD if not read_gpu().available else None


def _card(args: argparse.Namespace) -> tuple[str | None, float | None]:
    """(card name, total MiB) from the arguments, else from NVML; (None, None) when nobody knows."""
    if args.gpu_mib:
        return None, float(args.gpu_mib)
    if args.gpu:
        from oomdoctor.estimate.cards import card_by_name

        card = card_by_name(args.gpu)
        return card.name, card.total_mib
    from oomdoctor.facts.gpu import read_gpu

    gpu = read_gpu()
    if gpu.first is not None:
        return gpu.first.name, gpu.first.total_mib
    return None, None


def build(args: argparse.Namespace) -> tuple[ConfigFacts, ModelFacts, Estimate, dict[str, Any]]:
    """Read the config and model, estimate, and search the largest fitting micro-batch when the card is known."""
    from oomdoctor.errors import BadInput
    from oomdoctor.estimate import accumulation_for, estimate, largest_fitting_micro_batch
    from oomdoctor.estimate.search import FIT_MARGIN
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.dataset import known_lengths
    from oomdoctor.facts.model import read_model

    config = read_config(args.config)
    model = read_model(config)
    if not model.hidden_size:
        raise BadInput(
            msg("est_model_unknown", None, name=config.model_name_or_path or "?", missing="config.json")
        )
    data = known_lengths(args.lengths, args.longest_tokens, args.eval_longest_tokens)
    card_name, total_mib = _card(args)
    calibration = None
    if not getattr(args, "no_calibration", False):
        from oomdoctor.estimate.calibrate import find_calibration

        calibration = find_calibration(config, calibration_card(card_name))
    result = estimate(config, model, data=data, gpu_total_mib=total_mib, calibration=calibration)
    extra: dict[str, Any] = {"card": card_name, "fit_margin": FIT_MARGIN}
    if total_mib:
        batch = largest_fitting_micro_batch(config, model, data=data, gpu_total_mib=total_mib,
                                            calibration=calibration)  # fmt: skip
        extra["fitting_micro_batch"] = batch
        extra["fitting_accumulation"] = accumulation_for(config, batch) if batch else None
    return config, model, result, extra


def run(args: argparse.Namespace) -> int:
    from oomdoctor.facts.types import to_jsonable

    config, model, result, extra = build(args)
    if args.json:
        payload = to_jsonable(result)
        payload["model"] = {"name": model.name, "source": model.source, "params": model.params}
        payload.update(extra)
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print(report(config, model, result, extra, args.lang))
    return EXIT_OK


def report(
    config: ConfigFacts, model: ModelFacts, result: Estimate, extra: dict[str, Any], lang: Lang
) -> str:
    """The estimate as a table a person reads in a terminal: the setup, the terms and phases, the verdict
    on the card, and what the estimate rests on."""
    out = [msg("est_header", lang, model=model.name or "?", source=model.source)]
    out += _setup_lines(config, result, lang)
    out += _breakdown_lines(result, lang)
    out += _card_lines(result, extra, lang)
    out += _basis_lines(result, lang)
    return "\n".join(out)


def _method(config: ConfigFacts) -> str:
    """The fine-tuning method, with the LoRA rank and targets (QLoRA with its bits)."""
    if config.finetuning_type != "lora":
        return config.finetuning_type
    if config.quantization_bit:
        return f"QLoRA {config.quantization_bit}-bit, r{config.lora_rank} ({config.lora_target})"
    return f"LoRA r{config.lora_rank} ({config.lora_target})"


def _setup_lines(config: ConfigFacts, result: Estimate, lang: Lang) -> list[str]:
    """The method, precision, checkpointing and attention; the batch and the length it is padded to."""
    why = "est_len_longest" if result.padded_len_source == "longest_sample" else "est_len_cutoff"
    gc = msg("est_on" if config.gradient_checkpointing else "est_off", lang)
    lines = [
        "  "
        + msg(
            "est_setup",
            lang,
            method=_method(config),
            precision=config.precision,
            gc=gc,
            attention=result.attention,
        ),  # fmt: skip
        "  "
        + msg(
            "est_batch_line", lang, batch=result.micro_batch, length=result.padded_len, why=msg(why, lang)
        ),  # fmt: skip
    ]
    if result.eval_len:
        lines.append("  " + msg("est_eval_line", lang, batch=result.eval_batch, length=result.eval_len))
    return lines


def _breakdown_lines(result: Estimate, lang: Lang) -> list[str]:
    """The memory terms (the dominant one marked) and the peak of each phase, in aligned columns."""
    from oomdoctor.report.table import pad, width
    from oomdoctor.report.units import number

    labels = {key: msg(f"term_{key}", lang) for key in result.terms}
    phase_labels = {key: msg(f"est_phase_{key}", lang) for key in result.phases}
    label_width = max(width(label) for label in [*labels.values(), *phase_labels.values()]) + 2
    lines = ["", msg("est_terms_header", lang)]
    for key, value in result.terms.items():
        mark = "  " + msg("est_dominant", lang) if key == result.dominant_term else ""
        lines.append(f"  {pad(labels[key], label_width)}{pad(number(value), 10, 'right')}{mark}")
    lines += ["", msg("est_phases_header", lang)]
    for key, value in result.phases.items():
        lines.append(f"  {pad(phase_labels[key], label_width)}{pad(number(value), 10, 'right')}")
    return lines


def _card_lines(result: Estimate, extra: dict[str, Any], lang: Lang) -> list[str]:
    """The peak, what nvidia-smi would show, whether it fits the card, and the largest batch that does."""
    from oomdoctor.report.units import number as _n

    low, high = result.expected_nvidia_smi_mib
    total = result.gpu_total_mib
    lines = ["", msg("est_peak", lang, peak=_n(result.peak_allocated_mib))]
    if total is not None and low > total:
        lines.append(msg("est_band_over", lang, low=_n(low), total=_n(total)))
    elif total is not None and result.fills_card:
        lines.append(msg("est_band_fills", lang, low=_n(low), total=_n(total)))  # never more than the card
    else:
        lines.append(msg("est_band", lang, low=_n(low), high=_n(high)))
    if total is None:
        return [*lines, msg("est_card_unknown", lang)]
    return [*lines, _card_verdict(result, total, extra.get("card") or "--gpu-mib", lang),
            _fitting_batch_line(extra, lang)]  # fmt: skip


def _card_verdict(result: Estimate, total: float, card: str, lang: Lang) -> str:
    """Fits with headroom, fits only as allocated (tight), or does not fit."""
    from oomdoctor.report.units import number as _n

    if result.fits:
        return msg("est_card_fits", lang, card=card, total=_n(total), headroom=_n(result.headroom_mib or 0))
    key = "est_card_tight" if result.allocated_fits else "est_card_no"
    return msg(key, lang, card=card, total=_n(total), peak=_n(result.peak_allocated_mib))


def _fitting_batch_line(extra: dict[str, Any], lang: Lang) -> str:
    """The largest micro-batch (and its accumulation) that fits with the margin, or that none does."""
    margin = round(100 * float(extra["fit_margin"]))
    batch = extra.get("fitting_micro_batch")
    if not batch:
        return msg("est_fitting_none", lang, margin=margin)
    return msg("est_fitting_batch", lang, margin=margin, batch=batch,
               accumulation=extra.get("fitting_accumulation"))  # fmt: skip


def _basis_lines(result: Estimate, lang: Lang) -> list[str]:
    """What the estimate rests on: the calibration that set its constants, and what it assumed."""
    lines: list[str] = []
    if result.calibration:
        names = ", ".join(result.calibration["from_calibration"]) or "-"
        lines += ["", msg("est_calibrated", lang, text=result.calibration["text"][lang], names=names)]
    if result.notes:
        lines += ["", msg("est_assumptions", lang)]
        lines += [f"  - {note[lang]}" for note in result.notes]
    return lines
