"""A forward-only traceback through a ZeRO-3 / FSDP gather or the attention kernel, in a log that shows no
evaluation, is the training step (``step_forward_frames`` in facts/log_markers.yaml). Excerpts of public threads."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# deepspeedai/DeepSpeed#1624 (ZeRO-3, second iteration): the gather of a layer's parameters in a forward.
ZERO3_GATHER = (
    'File "/site-packages/torch/distributed/distributed_c10d.py", line 1432, in all_gather\n'
    "    work = _default_pg.allgather([tensor_list], [tensor])\n"
    "RuntimeError: CUDA out of memory. Tried to allocate 274.00 MiB (GPU 1; 23.70 GiB total capacity; 21.95 GiB "
    "already allocated; 25.69 MiB free; 22.28 GiB reserved in total by PyTorch)\n"
)
# hiyouga/LLaMA-Factory#7798 (RTX 5090, Qwen2.5-VL LoRA): a bare source line calling SDPA, then the message.
SDPA_LINE = (
    "   attn_output = F.scaled_dot_product_attention(q, k, v, attention_mask, dropout_p=0.0)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.11 GiB. GPU 0 has a total capacity of "
    "31.36 GiB of which 5.76 GiB is free.\n"
)


def test_a_zero3_gather_in_a_forward_is_the_training_step() -> None:
    assert parse_log_text(ZERO3_GATHER).phase == "first_batch"


def test_an_sdpa_call_in_a_forward_is_the_training_step() -> None:
    assert parse_log_text(SDPA_LINE).phase == "first_batch"


def test_a_plain_forward_frame_is_still_not_placed() -> None:
    text = SDPA_LINE.replace("F.scaled_dot_product_attention(q, k, v, attention_mask, dropout_p=0.0)", "self.mlp(x)")
    assert parse_log_text(text).phase == "unknown"


def test_a_gather_during_evaluation_stays_evaluation() -> None:
    text = "***** Running Evaluation *****\n  Num examples = 200\n" + ZERO3_GATHER
    assert parse_log_text(text).phase == "eval"
