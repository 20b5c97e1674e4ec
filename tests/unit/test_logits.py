"""Is the failing request the logits (facts/logits.py)? Frames and sizes from real messages."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.logits import logits_frame, request_is_logits

QWEN_VOCAB = 151936


def test_a_cross_entropy_frame_among_the_innermost_is_logits() -> None:
    # hiyouga/LLaMA-Factory#6800 (dev set): the loss of the first step, cross_entropy innermost
    excerpt = (
        'File "/site-packages/torch/nn/functional.py", line 3479, in cross_entropy\n'
        "    return torch._C._nn.cross_entropy_loss(\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 3 has a total capacity of "
        "31.74 GiB of which 1.41 GiB is free.\n"
    )
    assert logits_frame(parse_log_text(excerpt).frames) == "cross_entropy"


def test_a_loss_wrapper_far_above_an_attention_kernel_is_not_logits() -> None:
    frames = [
        "train",
        "training_step",
        "compute_loss",
        "forward",
        "_call_impl",
        "forward",
        "_call_impl",
        "forward",
        "scaled_dot_product_attention",
    ]
    assert logits_frame(frames) is None
    assert (
        logits_frame(["compute_loss", "concatenated_forward", "selective_log_softmax"])
        == "selective_log_softmax"
    )


def test_the_size_of_this_batchs_logits() -> None:
    # 4.64 GiB = 4 x 2048 x 151,936 x 4 bytes (the fp32 upcast of the loss)
    assert request_is_logits(4.64 * 1024, 4, [2048], QWEN_VOCAB, "sft")
    assert not request_is_logits(4.64 * 1024, 4, [1024], QWEN_VOCAB, "sft")
    # half as many bytes per entry (bf16 logits) matches too
    assert request_is_logits(2.32 * 1024, 4, [2048], QWEN_VOCAB, "sft")


def test_dpo_holds_chosen_and_rejected_logits_at_once() -> None:
    size = 2 * 2 * 1024 * QWEN_VOCAB * 4 / 1024**2  # batch 2, chosen + rejected
    assert request_is_logits(size, 2, [1024], QWEN_VOCAB, "dpo")
    assert not request_is_logits(size, 2, [1024], QWEN_VOCAB, "sft")


def test_nothing_known_is_no_evidence() -> None:
    assert not request_is_logits(None, 4, [2048], QWEN_VOCAB, "sft")
    assert not request_is_logits(4000.0, None, [2048], QWEN_VOCAB, "sft")
    assert not request_is_logits(4000.0, 4, [2048], None, "sft")


def test_a_bare_source_line_that_takes_log_softmax_is_logits() -> None:
    # modelscope/ms-swift#2044 (DPO, rank 1): the excerpt keeps only the source line of the failing frame
    excerpt = (
        "[rank1]:     per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2))\n"
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.36 GiB. GPU 1 has a total "
        "capacity of 47.50 GiB of which 1.52 GiB is free.\n"
    )
    f = parse_log_text(excerpt)
    assert f.frames == ["log_softmax"] and logits_frame(f.frames) == "log_softmax"


def test_a_frameless_message_the_size_of_this_batchs_logits_is_the_training_step() -> None:
    # hiyouga/LLaMA-Factory#4253 (gemma-7b LoRA, batch 4, cutoff 1024): only the message, no frames; 3.90 GiB is
    # 4 x 1024 x 256000 x 4 bytes, the fp32 logits of this batch.
    from oomdoctor.facts.config import config_from_mapping
    from oomdoctor.facts.model import model_from_name
    from oomdoctor.rules.assemble import facts_of
    from oomdoctor.rules.engine import diagnose

    raw = {"stage": "sft", "finetuning_type": "lora", "model_name_or_path": "google/gemma-7b",
           "per_device_train_batch_size": 4, "cutoff_len": 1024}  # fmt: skip
    message = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.90 GiB.\n"
    config = config_from_mapping(raw)
    model = model_from_name("google/gemma-7b")
    diagnosis = diagnose(facts_of(config=config, log=parse_log_text(message), model=model))
    assert (diagnosis.phase, diagnosis.cause) == ("first_batch", "logits")
    assert "phase_by_logits_size" in [f.id for f in diagnosis.findings]
    other = diagnose(
        facts_of(config=config, log=parse_log_text(message.replace("3.90", "1.20")), model=model)
    )
    assert other.phase == "unknown"


# PrimeIntellect-ai/verifiers#661: an RL trainer's step asks for 37 GiB of a 95 GiB card; no model shape is given.
RL_STEP_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 36.98 GiB. GPU 0 has a total capacity of "
    "95.00 GiB of which 35.86 GiB is free. Including non-PyTorch memory, this process has 59.13 GiB memory in "
    "use. Of the allocated memory 56.35 GiB is allocated by PyTorch, and 99.55 MiB is reserved by PyTorch but "
    "unallocated.\n"
)


def test_a_third_of_the_card_in_one_request_of_a_log_prob_trainer_is_its_logits() -> None:
    """No vocabulary to size the logits by: in a PPO/DPO/KTO step one request of a third of the card is the
    full-vocabulary logits; the same request in plain SFT, or a small one, says nothing."""
    from oomdoctor.facts.config import config_from_mapping
    from oomdoctor.facts.logits import request_is_logprob_logits
    from oomdoctor.rules.assemble import facts_of
    from oomdoctor.rules.engine import diagnose

    log = parse_log_text(RL_STEP_OOM)
    answers = {"phase": "long_sample"}
    rl = diagnose(facts_of(config=config_from_mapping({"stage": "ppo"}), log=log, answers=answers))
    assert rl.phase == "long_sample" and rl.cause == "logits"
    sft = diagnose(facts_of(config=config_from_mapping({"stage": "sft"}), log=log, answers=answers))
    assert sft.cause == "activations"
    assert not request_is_logprob_logits(8 * 1024, 95 * 1024, None, "dpo")  # a twelfth of the card
    assert not request_is_logprob_logits(37 * 1024, 95 * 1024, QWEN_VOCAB, "ppo")  # the vocabulary sizes it
