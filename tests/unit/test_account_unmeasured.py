"""Processes an OOM message lists with "0 bytes" are unmeasured (NVML sees their pids, not their use: a
container, vGPU, MIG), not processes that hold nothing: the account gives them what the sum leaves, and whose
they are stays a question (facts/account.py)."""

from __future__ import annotations

from oomdoctor.facts.account import account_json, account_of
from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# Four ranks of one job all placed on cuda:0 inside a container: every process, this one included, shows 0.
ZERO_BYTES = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 20.75 MiB is free. Process 5120 has 0 bytes memory in use. Process 5121 has 0 bytes "
    "memory in use. Process 5122 has 0 bytes memory in use. Including non-PyTorch memory, this process has "
    "0 bytes memory in use. Of the allocated memory 18.62 GiB is allocated by PyTorch, and 301.44 MiB is "
    "reserved by PyTorch but unallocated.\n"
)


def test_zero_bytes_is_unknown_and_the_rest_of_the_card_is_theirs() -> None:
    acc = account_of(parse_log_text(ZERO_BYTES))
    assert acc is not None and acc.this_run_mib is None and acc.this_run_source == "reserve"
    assert [p.whose for p in acc.listed] == ["unmeasured"] * 3
    # 79.15 GiB - 20.75 MiB free - 18.92 GiB reserve - a CUDA context allowance
    expected = 79.15 * 1024 - 20.75 - (18.62 * 1024 + 301.44) - 1536.0
    assert abs(acc.held_by_unmeasured_mib - expected) < 1.0
    line = account_json(acc)["line"]["en"]
    assert "this run 0 " not in line and "3 process(es) listed with 0 bytes" in line


def test_the_card_held_by_unmeasured_processes_asks_whose_they_are() -> None:
    facts = facts_of(log=parse_log_text(ZERO_BYTES), answers={"phase": "load"})
    assert facts.derived.other_process_whose == "unclear"
    assert facts.derived.other_process_share is not None and facts.derived.other_process_share > 0.5
    diagnosis = diagnose(facts)
    assert "process_owner" in [q.key for q in diagnosis.questions]
    other = diagnose(facts.with_answers({"process_owner": "other"}))
    assert other.proposal is not None and other.proposal.rule == "other_process.free_the_card"


def test_measured_processes_are_read_as_before() -> None:
    text = ZERO_BYTES.replace("Process 5120 has 0 bytes", "Process 5120 has 52.10 GiB").replace(
        "this process has 0 bytes", "this process has 19.50 GiB"
    )
    acc = account_of(parse_log_text(text))
    assert acc is not None and acc.this_run_mib == 19.5 * 1024
    assert [p.whose for p in acc.listed if p.pid == 5120] != ["unmeasured"]


def test_a_gpu_index_alone_is_no_sign_of_several_processes() -> None:
    from oomdoctor.facts.config import config_from_mapping

    # One process spreading a model over four cards (device_map: auto) runs out on its third card.
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 2 has a total capacity of "
        "23.64 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 22.61 GiB memory in "
        "use. Of the allocated memory 21.88 GiB is allocated by PyTorch, and 312.40 MiB is reserved by PyTorch "
        "but unallocated.\n"
    )
    config = config_from_mapping({"stage": "sft", "finetuning_type": "lora"})
    ids = [f.id for f in diagnose(facts_of(config=config, log=parse_log_text(text))).findings]
    assert "multi_gpu_no_deepspeed" not in ids
    ranked = parse_log_text("[rank3]: " + text)
    ids = [f.id for f in diagnose(facts_of(config=config, log=ranked)).findings]
    assert "multi_gpu_no_deepspeed" in ids


def test_processes_that_make_up_the_stated_world_size_are_this_runs_own_ranks() -> None:
    # torchrun --nproc_per_node 3, but every rank moved its model to cuda:0.
    text = (
        "[INFO|2025-01-09 08:00:01] llamafactory.hparams.parser:406 >> Process rank: 0, world size: 3, "
        "device: cuda:0, distributed training: True, compute dtype: torch.bfloat16\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 310.75 MiB is free. Process 7001 has 26.10 GiB memory in use. Process 7002 has "
        "26.02 GiB memory in use. Including non-PyTorch memory, this process has 26.70 GiB memory in use. Of the "
        "allocated memory 25.40 GiB is allocated by PyTorch, and 602.17 MiB is reserved by PyTorch but "
        "unallocated.\n"
    )
    log = parse_log_text(text)
    acc = account_of(log)
    assert acc is not None and [p.whose for p in acc.listed] == ["own_rank", "own_rank"]
    facts = facts_of(log=log)
    assert facts.derived.other_process_whose == "own_ranks"
    ids = [f.id for f in diagnose(facts).findings]
    assert "own_ranks_on_card" in ids and "other_processes" not in ids
    # the same card without a stated world size: whose they are stays a question
    alone = parse_log_text(text.split("\n", 1)[1])
    assert facts_of(log=alone).derived.other_process_whose != "own_ranks"
