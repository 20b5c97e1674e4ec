"""A call chain the reporter wrote out with arrows instead of pasting the traceback (facts/log_phase.py
``chain_frames``; excerpts from real public threads, NeMo RL and NeMo Automodel): its links are frames where one
names what ran (a loss, a set-up); a chain of bare forward / backward links places nothing (it leaves frames out)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.log_phase import chain_frames

NEMO = "\n".join(
    [
        "Observed OOM with Megatron backend and large context length in the train forward pass:",
        "",
        "MegatronPolicyWorker.train",
        "  → SequencePackingLossWrapper.__call__ → prepare_loss_input",
        "  → get_next_token_logprobs_from_logits   (model_utils.py:1383)",
        "  → from_parallel_logits_to_logprobs      (model_utils.py:1012, un-chunked branch)",
        "  → DistributedLogprob.forward → _compute_distributed_log_softmax (model_utils.py:59)",
        "      sum_exp_logits = vocab_parallel_logits.exp().sum(-1, keepdim=True).float()",
        "torch.OutOfMemoryError: Tried to allocate 12.60 GiB. GPU had 12.44 GiB free of 79.19",
    ]
)


def test_each_link_of_a_written_chain_is_a_frame_with_its_file() -> None:
    frames = chain_frames("train_ft.py:1208 _forward_backward_step -> torch/_tensor.py:623 backward")
    assert [(f.path, f.function) for f in frames] == [
        ("train_ft.py", "_forward_backward_step"),
        ("torch/_tensor.py", "backward"),
    ]
    assert [
        f.function
        for f in chain_frames(
            "  → DistributedLogprob.forward → _compute_distributed_log_softmax (model_utils.py:59)"
        )
    ] == [
        "forward",
        "_compute_distributed_log_softmax",
    ]


def test_prose_with_an_arrow_is_no_chain() -> None:
    assert chain_frames("memory grows -> then it dies after 3 hours") == []
    f = parse_log_text(
        "loss -> nan\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert f.phase == "unknown"


def test_nemo_rls_loss_chain_places_the_step_and_names_the_logits_frames() -> None:
    f = parse_log_text(NEMO + "\n")
    assert f.oom and f.phase == "first_batch"
    assert "_compute_distributed_log_softmax" in f.frames


def test_a_chain_of_backward_links_alone_places_nothing() -> None:
    log = "\n".join(
        [
            "train_ft.py:1208 _forward_backward_step -> torch/_tensor.py:623 backward",
            "  -> autograd/__init__.py:395 backward -> autograd/graph.py:979 _engine_run_backward",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 720.00 MiB.",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.phase == "unknown" and not f.frames
