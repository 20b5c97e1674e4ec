"""Glue between the readers, the estimator and the rules: what the CLI verbs and the TUI call.

Nothing here imports textual or the training stack; each reader fails soft where a fact is optional
(GPU, model shape) and raises ``BadInput`` where the user gave us something unusable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oomdoctor.diagnosis import Diagnosis
from oomdoctor.errors import BadInput
from oomdoctor.i18n import msg

if TYPE_CHECKING:
    from oomdoctor.facts.gpu import GpuSource
    from oomdoctor.facts.types import DataFacts
    from oomdoctor.rules.facts import Facts


def parse_answers(pairs: list[str] | None) -> dict[str, str]:
    """``["phase=eval", "weights_loaded=yes"]`` -> ``{"phase": "eval", ...}``; BadInput on a malformed pair."""
    answers: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise BadInput(msg("bad_answer_syntax", None, value=pair))
        answers[key.strip()] = value.strip()
    return answers


def gather(
    config_path: str | os.PathLike[str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    *,
    answers: Mapping[str, str] | None = None,
    gpu_source: GpuSource | None = None,
    longest_tokens: int | None = None,
    eval_longest_tokens: int | None = None,
    lengths_file: str | os.PathLike[str] | None = None,
    data: DataFacts | None = None,
    capacity_mib: float | None = None,
) -> Facts:
    """Read every fact we can (config, log, GPU, model shape) and assemble them, with the estimate built
    on the settled card and world size (``rules.assemble``).

    Real sample lengths come from ``data`` (measured earlier in this session), a file saved by
    ``oomdoctor lengths --json``, or the user's own numbers (``longest_tokens`` wins over the file's);
    measuring them here would import the training stack. ``capacity_mib`` is the user's --gpu-mib.
    """
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.gpu import read_gpu
    from oomdoctor.facts.model import read_model
    from oomdoctor.facts.ranks import read_run_log
    from oomdoctor.rules.assemble import assemble
    from oomdoctor.rules.facts import Readings

    if config_path is None and log_path is None:
        raise BadInput(msg("need_config_or_log", None))
    log = read_run_log(Path(log_path)) if log_path is not None else None  # a file, output_dir or node logs
    config = read_config(Path(config_path)) if config_path is not None else None
    if data is None and (lengths_file, longest_tokens, eval_longest_tokens) != (None, None, None):
        from oomdoctor.facts.dataset import known_lengths  # only for lengths given (none: no lengths)

        data = known_lengths(
            Path(lengths_file) if lengths_file is not None else None, longest_tokens, eval_longest_tokens
        )
    readings = Readings(
        config=config,
        log=log,
        gpu=read_gpu(gpu_source),
        model=read_model(config) if config is not None else None,
        data=data,
        env=dict(os.environ),
        capacity_mib=capacity_mib,
    )
    facts = assemble(readings, answers)
    return _calibrated(facts, readings, answers)


def _calibrated(facts: Facts, readings: Any, answers: Mapping[str, str] | None) -> Facts:
    """The bundle again with the estimate a probe's calibration gives (estimate/calibrate.py), when one is
    stored for this setting: on the settled card and world size, pinned in the readings."""
    from oomdoctor import records
    from oomdoctor.estimate import estimate

    config, model = facts.config, facts.model
    if config is None or model is None or not model.hidden_size or facts.estimate is None:
        return facts
    calibration = _calibration(config, facts.log, facts.gpu)
    if calibration is None:
        return facts
    try:
        pinned = estimate(
            config, model, data=facts.data, gpu_total_mib=facts.capacity_mib, calibration=calibration
        )
    except BadInput:
        return facts
    from oomdoctor.rules.assemble import assemble

    return assemble(records.replace(readings, estimate=pinned), answers)


def _calibration(config: Any, log: Any, gpu: Any) -> Any:
    """The calibration a probe stored for this setting (estimate/calibrate.py), on the card that ran out (the
    log's), else the visible one, else this machine's host memory."""
    from oomdoctor.usercache import CALIBRATIONS, any_file

    if not any_file(CALIBRATIONS, ".json"):
        return None  # no trial stored one (the usual case): the calibration code is not imported
    from oomdoctor.estimate.calibrate import HOST_CARD, find_calibration

    card = (log.card_name if log is not None else None) or (gpu.first.name if gpu.first is not None else None)
    return find_calibration(config, card or (HOST_CARD if not gpu.available else None))


def run_diagnosis(
    config_path: str | os.PathLike[str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    **inputs: Any,
) -> Diagnosis:
    """Read the facts and walk the decision nodes: the whole of ``oomdoctor diagnose``.

    ``inputs`` are ``gather``'s keyword arguments (answers, gpu_source, longest_tokens, ...).
    """
    from oomdoctor.diagnosis import Finding
    from oomdoctor.rules.engine import diagnose

    facts = gather(config_path, log_path, **inputs)
    diagnosis = diagnose(facts)
    calibration = facts.estimate.calibration if facts.estimate is not None else None
    if calibration:  # say which estimate the diagnosis rests on
        diagnosis.findings.append(Finding(id="estimate.calibrated", text=calibration["text"]))
    return diagnosis
