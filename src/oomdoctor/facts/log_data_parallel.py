"""A run that trains with ``torch.nn.DataParallel``: one process driving several GPUs, as the log says it.

The Trainer falls back to DataParallel when a script sees several GPUs without a distributed launcher
(``python train.py`` instead of ``torchrun``): its banner says "Training with DataParallel so batch size has been
adjusted to: N", transformers' example scripts log "n_gpu: 8, distributed training: False", and DataParallel's
own files (``torch/nn/parallel/data_parallel.py``, its gather warning in ``_functions.py``) show in warnings and
frames. Such a run is not several ranks: GPU 0 holds the master copy, gathers every replica's outputs (the whole
batch's logits) and runs the optimizer, so it runs out first. The line shapes are data (``data_parallel_lines``
in log_markers.yaml); read line by line by the log scanner (a line holding one of ``HINTS``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from oomdoctor.facts.log_tables import markers_raw
from oomdoctor.lazyre import lazy
from oomdoctor.records import record

# Literals every line the patterns match holds (the scanner's needles, log_needles._scanner_needles).
HINTS = ("DataParallel", "n_gpu", "nn/parallel/")
_MAX_GPUS = 4096


@record(frozen=True)
class DataParallelLine:
    gpus: int | None  # the GPUs the line names, when it does
    batch: int | None = None  # the Trainer's adjusted batch: per-device batch x GPUs


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], ...]:
    raw = markers_raw()
    return tuple(lazy(entry["pattern"]) for entry in raw.get("data_parallel_lines") or ())


def data_parallel_line(line: str) -> DataParallelLine | None:
    """What one log line says of a DataParallel run, or None when it says nothing of one."""
    if not any(h in line for h in HINTS):
        return None
    for pattern in _patterns():
        m = pattern.search(line)
        if m is None:
            continue
        count, batch = _count(m.groupdict().get("gpus")), _count(m.groupdict().get("batch"))
        if count is not None and not 1 < count <= _MAX_GPUS:
            return None  # "n_gpu: 1" is no DataParallel run
        return DataParallelLine(count, batch)
    return None


def _count(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) <= 6 else None


def gpus_from_batch(adjusted: int | None, per_device: int | None) -> int | None:
    """The GPUs the Trainer's adjusted DataParallel batch implies (adjusted = per-device batch x GPUs)."""
    if not adjusted or not per_device or adjusted % per_device:
        return None
    gpus = adjusted // per_device
    return gpus if 1 < gpus <= _MAX_GPUS else None
