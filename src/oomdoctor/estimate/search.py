"""What-if questions on top of the estimate: a config with one change applied, the largest micro-batch that fits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oomdoctor.estimate.memory import estimate
from oomdoctor.facts.types import ConfigFacts, DataFacts, ModelFacts

# "Fits" keeps nvidia-smi's expected high end under 90 % of the card: the margin the estimate leaves for what it
# cannot see (other allocations, a longer sample than measured).
FIT_MARGIN = 0.9


def with_changes(config: ConfigFacts, changes: dict[str, Any]) -> ConfigFacts:
    """A copy of ``config`` with new YAML values, re-derived exactly as facts/config.py derives a config
    (effective batch, precision, checkpointing, quantization, ZeRO). A value of None removes the key, so
    LLaMA-Factory's default applies again. The original is not touched."""
    from oomdoctor.facts.config import config_from_mapping

    raw = dict(config.raw)
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    base_dir = Path(config.path).parent if config.path and not config.path.startswith("<") else None
    return config_from_mapping(raw, path=config.path, base_dir=base_dir, world_size=config.world_size)


def accumulation_for(config: ConfigFacts, micro_batch: int) -> int:
    """The gradient_accumulation_steps that keeps the effective batch with ``micro_batch`` (rounded up when
    the old product is not a multiple of it)."""
    per_device = config.per_device_train_batch_size * config.gradient_accumulation_steps
    return max(1, -(-per_device // max(1, micro_batch)))


def micro_batch_candidates(config: ConfigFacts) -> list[int]:
    """Micro-batches that keep the effective batch exactly: divisors of batch x accumulation, largest first."""
    per_device = config.per_device_train_batch_size * config.gradient_accumulation_steps
    return sorted((b for b in range(1, per_device + 1) if per_device % b == 0), reverse=True)


def largest_fitting_micro_batch(
    config: ConfigFacts,
    model: ModelFacts,
    *,
    data: DataFacts | None = None,
    gpu_total_mib: float,
    margin: float = FIT_MARGIN,
    longest_tokens: int | None = None,
    calibration: Any = None,
) -> int | None:
    """The largest micro-batch whose expected nvidia-smi high stays under ``margin`` x the card, keeping
    the effective batch (pair it with ``accumulation_for``). None when even a micro-batch of 1 does not
    fit, e.g. because the weights or the eval batch alone are too big."""
    limit = margin * gpu_total_mib
    for micro_batch in micro_batch_candidates(config):
        trial = with_changes(
            config,
            {
                "per_device_train_batch_size": micro_batch,
                "gradient_accumulation_steps": accumulation_for(config, micro_batch),
            },
        )
        result = estimate(trial, model, data=data, longest_tokens=longest_tokens, gpu_total_mib=gpu_total_mib,
                          calibration=calibration)  # fmt: skip
        if result.expected_nvidia_smi_mib[1] <= limit:
            return micro_batch
    return None
