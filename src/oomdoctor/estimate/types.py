"""The estimator's answer (the contract behind ``oomdoctor estimate --json``)."""

from __future__ import annotations

from typing import Any

from oomdoctor.records import field, record
from oomdoctor.text import Text


@record
class Estimate:
    """Per-term and per-phase peak *allocated* memory on one GPU, plus the band nvidia-smi should show.

    ``terms`` keys: weights, trainable_state, activations, logits_loss, eval, overhead (MiB).
    ``phases`` keys: load, train, eval (MiB, allocated peak in that phase).
    """

    peak_allocated_mib: float
    expected_nvidia_smi_mib: tuple[float, float]  # [low, high]
    phases: dict[str, float]
    terms: dict[str, float]
    dominant_term: str  # the largest term of the train-step peak (e.g. "logits_loss")
    padded_len: int  # the sequence length used for activations and logits
    padded_len_source: str  # "longest_sample" (real longest, rounded up to 8) or "cutoff_len"
    micro_batch: int
    eval_batch: int
    gpu_total_mib: float | None = None
    fits: bool | None = None  # expected_nvidia_smi high <= gpu_total; None when the card is unknown
    headroom_mib: float | None = None  # gpu_total - expected high
    model_source: str = "unknown"
    assumptions: list[str] = field(default_factory=list)  # plain-English notes on what was assumed
    # Appended by the estimator:
    notes: list[Text] = field(default_factory=list)  # the assumptions in both languages
    eval_len: int | None = None  # padded eval length (None when no evaluation runs)
    allocated_fits: bool | None = None  # peak allocated + CUDA context <= card: False means a certain OOM
    variable_lengths: bool = True  # batches change shape (no packing): reserved creeps toward the card
    attention: str = "sdpa"  # eager / sdpa / fa2, as LLaMA-Factory will run it
    trainable_params: int | None = None
    tokens_per_micro_batch: int | None = None  # sequences x padded_len of the worst training batch
    # PyTorch's reserved peak (torch max_memory_reserved, LLaMA-Factory's RECORD_VRAM vram_reserved): the
    # nvidia-smi band without the CUDA context.
    expected_reserved_mib: tuple[float, float] | None = None  # [low, high]
    # With the card known: does the band's high end reach it (the cache would fill the card; nvidia-smi then
    # shows the card full), and the band as the card can show it (high capped at the card's total).
    fills_card: bool | None = None
    expected_nvidia_smi_on_card_mib: tuple[float, float] | None = None  # [low, min(high, card)]
    # Set when a calibration (estimate/calibrate.py) replaced stack-dependent constants: the trial, which
    # constants came from it (``from_calibration``), their values and a bilingual headline.
    calibration: dict[str, Any] | None = None
    # What a checkpoint save adds, by part (MiB; not in the peak): on one GPU beyond what the run holds
    # between steps (zero3_gather, fsdp_unshard, int8_layout_copy, optimizer_gather), and in the node's host
    # RAM (state_dict_copy, optimizer_copy). memory_model.yaml ``save`` says where each comes from.
    save_gpu_mib: dict[str, float] = field(default_factory=dict)
    save_host_mib: dict[str, float] = field(default_factory=dict)
