"""The whole model gathered onto each card inside a step: ZeRO-3's ``unwrap_model_for_generation`` (TRL's
online trainers generate with the full weights of a sharded policy), a weight sync to vLLM, DeepSpeed's
``GatheredParameters`` over the whole model. The failing traceback names it as a frame or calls it on a frame's
source line (``with unwrap_model_for_generation(model, ...) as unwrapped:`` in a trainer's own ``train``).

Such a failure is the weights (gathered whole: the full model in 16 bit on every card), not the batch: no
smaller batch helps. The function names are data (``whole_model_gathers`` in log_markers.yaml).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from oomdoctor.facts.log_tables import markers_raw
from oomdoctor.lazyre import lazy

_CALL = lazy(r"([A-Za-z_]\w*)\(")


class _Frame(Protocol):
    function: str | None
    code: str | None


@lru_cache(maxsize=1)
def whole_model_gathers() -> frozenset[str]:
    return frozenset(markers_raw().get("whole_model_gathers") or ())


def whole_model_gather(frames: Sequence[_Frame]) -> str | None:
    """The gathering function the traceback runs (as a frame or a call on a frame's line), innermost first."""
    known = whole_model_gathers()
    for frame in reversed(frames):
        if frame.function in known:
            return frame.function
        called: list[str] = [name for name in _CALL.findall(frame.code or "") if name in known]
        if called:
            return called[0]
    return None
