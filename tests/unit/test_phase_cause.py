"""The cause follows the phase's evidence: an OOM in the optimizer's update is the optimizer state, and with no
config written LLaMA-Factory's default (LoRA) does not put QLoRA ahead of the optimizer changes."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# huggingface/trl#2776 (a commenter's GRPO run): multi-tensor AdamW's update runs out, the message cut.
ADAMW_STEP = (
    '[rank0]:   File "/site-packages/torch/optim/optimizer.py", line 487, in wrapper\n'
    "[rank0]:     out = func(*args, **kwargs)\n"
    '[rank0]:   File "/site-packages/torch/optim/adamw.py", line 220, in step\n'
    "[rank0]:     adamw(\n"
    '[rank0]:   File "/site-packages/torch/optim/adamw.py", line 606, in _multi_tensor_adamw\n'
    "[rank0]:     exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)\n"
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total "
    "capacity of 94.99 GiB of which 87.19 MiB is free. Including non-PyTorch memory,\n"
)


def test_an_adamw_step_with_no_config_is_the_optimizer_state() -> None:
    diagnosis = diagnose(facts_of(log=parse_log_text(ADAMW_STEP), config=config_from_mapping({})))
    assert (diagnosis.phase, diagnosis.cause) == ("optimizer_step", "optimizer_state")
    assert diagnosis.proposal is not None and diagnosis.proposal.rule.startswith("optimizer_step.")


def test_a_written_lora_config_keeps_the_step_as_the_cause() -> None:
    config = config_from_mapping(
        {"finetuning_type": "lora", "model_name_or_path": "Qwen/Qwen2.5-7B-Instruct"}
    )
    diagnosis = diagnose(facts_of(log=parse_log_text(ADAMW_STEP), config=config))
    assert diagnosis.phase == "optimizer_step" and diagnosis.cause == "optimizer_state"
