"""FSDP seen in the log marks the run sharded (``LogFacts.fsdp_seen`` -> ``derived.sharded_by``): its
state-dict warnings, its class in a model repr, its source files in a warning; a plain data-parallel log does not."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

RANKS = "".join(
    f"[rank{r}]:[W1201 10:00:0{r}.000000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {r}] using GPU {r} "
    "as device used by this process is currently unknown.\n"
    for r in range(4)
)
SAVE_OOM = (
    "{'train_runtime': 3605.2, 'train_samples_per_second': 8.8, 'train_steps_per_second': 0.27, 'train_loss': 1.1, "
    "'epoch': 2.0}\n"
    "/usr/lib/python3.10/site-packages/torch/distributed/fsdp/_state_dict_utils.py:312: UserWarning: Failed to "
    "clone() tensor with name model.embed_tokens.weight on rank 0. This may mean that this state_dict entry could "
    "point to invalid memory regions after returning from state_dict() call if this parameter is managed by FSDP. "
    "Please check clone implementation of model.embed_tokens.weight. Error: CUDA out of memory. Tried to allocate "
    "500.00 MiB (GPU 0; 79.15 GiB total capacity; 77.01 GiB already allocated; 310.19 MiB free; 77.90 GiB "
    "reserved in total by PyTorch)\n"
)


def _config():
    return config_from_mapping({"stage": "sft", "finetuning_type": "full", "per_device_train_batch_size": 4})


def test_an_fsdp_clone_warning_marks_the_run_sharded_and_proposes_a_sharded_save() -> None:
    log = parse_log_text(RANKS + SAVE_OOM)
    assert log.fsdp_seen and log.oom
    facts = facts_of(config=_config(), log=log)
    assert facts.derived.sharded_by == "fsdp"
    diagnosis = diagnose(facts)
    assert diagnosis.phase == "save" and diagnosis.proposal is not None
    assert diagnosis.proposal.rule == "save.fsdp_sharded_state_dict"
    assert "multi_gpu_no_deepspeed" not in [f.id for f in diagnosis.findings]


def test_the_fsdp_class_in_a_model_repr_marks_the_run_sharded() -> None:
    text = "FullyShardedDataParallel(\n  (_fsdp_wrapped_module): LlamaForCausalLM(\n" + RANKS
    assert parse_log_text(text).fsdp_seen


def test_a_plain_data_parallel_log_is_not_sharded() -> None:
    step_oom = (
        "{'loss': 1.42, 'grad_norm': 0.8, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
        '[rank1]:   File "/usr/lib/python3.10/site-packages/torch/nn/parallel/distributed.py", line 1643, in forward\n'
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 1 has a total "
        "capacity of 79.15 GiB of which 1.02 GiB is free.\n"
    )
    log = parse_log_text(RANKS + step_oom)
    assert log.oom and not log.fsdp_seen
    assert facts_of(config=_config(), log=log).derived.sharded_by == "none"
