"""The memory model: per-term and per-phase peaks, the nvidia-smi band, and what-if searches.

Importing this package stays light (stdlib + PyYAML): the TUI and the rules call it on every change.
"""

from oomdoctor.estimate.memory import estimate
from oomdoctor.estimate.search import (
    accumulation_for,
    largest_fitting_micro_batch,
    micro_batch_candidates,
    with_changes,
)
from oomdoctor.estimate.types import Estimate

__all__ = [
    "Estimate",
    "accumulation_for",
    "estimate",
    "largest_fitting_micro_batch",
    "micro_batch_candidates",
    "with_changes",
]
