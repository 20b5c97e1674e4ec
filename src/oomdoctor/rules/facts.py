"""The bundle of facts a diagnosis reads, addressed by dotted paths such as ``config.cutoff_len``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.types import ConfigFacts, DataFacts, GpuFacts, LogFacts, ModelFacts

_MISSING = object()


@dataclass
class Facts:
    config: ConfigFacts | None = None
    log: LogFacts | None = None
    gpu: GpuFacts | None = None
    model: ModelFacts | None = None
    data: DataFacts | None = None
    estimate: Estimate | None = None
    answers: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    gpu_total_mib: float | None = None  # the card that matters: the log's capacity, else NVML's first GPU
    derived: dict[str, Any] = field(default_factory=dict)  # computed by the engine (e.g. phase after answers)

    def get(self, path: str) -> Any:
        """``"config.per_device_train_batch_size"`` -> its value; ``None`` when any part is unknown.

        Dict members are looked up by key (``answers.phase``, ``env.PYTORCH_CUDA_ALLOC_CONF``,
        ``estimate.terms.logits_loss``), dataclass members by attribute.
        """
        node: Any = self
        for part in path.split("."):
            if node is None:
                return None
            if isinstance(node, dict):
                node = node.get(part)
            else:
                node = getattr(node, part, _MISSING)
                if node is _MISSING:
                    raise KeyError(f"unknown fact path {path!r} (at {part!r})")
        return node
