"""What the diagnosis commits to as the cause once the phase is known (rules/derive.py, rules/engine.py): the
weights only where they are known to fill the card in a step, the estimate's dominant term only where it does
not hang on an unstated world size, no GPU-side cause while the memory kind is open."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.model import model_from_name
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# LLaMA-Factory#7490's config: full fine-tuning of a 1.5B model under ZeRO-3 at 4 x 16384 tokens per card.
ZERO3_FULL = {
    "model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct",
    "stage": "sft",
    "finetuning_type": "full",
    "deepspeed": "examples/deepspeed/ds_z3_config.json",
    "cutoff_len": 16384,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 1,
    "bf16": True,
    "enable_liger_kernel": True,
}
ANSWERED = {"phase": "first_batch", "memory_kind": "gpu"}


def _facts(fields: dict, **kw):
    config = config_from_mapping(fields)
    return facts_of(config=config, model=model_from_name(config.model_name_or_path), **kw)


def test_an_unstated_world_size_under_zero3_leaves_the_cause_open_and_asks_it() -> None:
    """Issue 8 item 10: the conflict is said and the world size asked; the cause is no longer "activations"
    (what the proposal targets) while the estimate's largest term hangs on the unstated world size."""
    facts = _facts(ZERO3_FULL, answers=ANSWERED)
    # at one process the unsharded optimizer state is largest, at eight the activations: not settled
    assert facts.estimate is not None and facts.estimate.dominant_term == "trainable_state"
    assert facts.derived.dominant_cause is None
    assert facts.derived.dominant_by_world == ((1, "trainable_state"), (64, "activations"))
    d = diagnose(facts)
    assert d.cause == "unknown" and d.proposal is not None  # a change is still proposed meanwhile
    asked = [q for q in d.questions if q.key == "world_size"]
    assert asked and [a.value for a in asked[0].answers] == ["1", "2", "4", "8", "16", "32", "64"]
    said = [f for f in d.findings if f.id == "dominant_by_world"]
    assert (
        said and "with 1 process" in said[0].text.en and "with 64 it is stored activations" in said[0].text.en
    )
    stated = _facts(ZERO3_FULL, answers=ANSWERED, world_size=8)
    assert stated.derived.dominant_cause == "activations" and diagnose(stated).cause == "activations"
    alone = _facts(ZERO3_FULL, answers=ANSWERED, world_size=1)
    assert alone.derived.dominant_cause == "optimizer_state"


def test_the_world_size_answer_settles_it_last() -> None:
    """The answer is assemble's last source of world size: it settles the cause where nothing else states it,
    and a stated world size (the launcher's count) wins over it."""
    answered = _facts(ZERO3_FULL, answers={**ANSWERED, "world_size": "8"})
    assert answered.derived.world_size == 8 and answered.derived.world_size_source == "answer"
    assert answered.config is not None and answered.config.world_size == 8
    assert answered.estimate is not None and answered.estimate.dominant_term == "activations"
    d = diagnose(answered)
    assert d.cause == "activations" and all(q.key != "world_size" for q in d.questions)
    alone = diagnose(_facts(ZERO3_FULL, answers={**ANSWERED, "world_size": "1"}))
    assert alone.cause == "optimizer_state"
    given = _facts(ZERO3_FULL, answers={**ANSWERED, "world_size": "1"}, world_size=8)
    assert given.derived.world_size == 8 and given.derived.world_size_source == "given"


def test_a_request_no_weight_tensor_can_be_is_the_steps() -> None:
    log = parse_log_text(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.88 GiB (GPU 4; 7"
    )
    config = config_from_mapping(
        {"finetuning_type": "full", "per_device_train_batch_size": 1, "cutoff_len": 8192}
    )
    facts = facts_of(config=config, log=log, answers={"phase": "first_batch"})
    assert facts.derived.request_is_step_tensor and not facts.derived.weights_fill_step
    d = diagnose(facts)
    assert d.cause == "activations" and d.proposal is not None and d.proposal.rule == "fallback.training_step"
    small = parse_log_text(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB (GPU 4; 7"
    )
    assert facts_of(config=config, log=small, answers={"phase": "first_batch"}).derived.weights_fill_step


def test_weights_offloaded_by_zero3_never_fill_a_step() -> None:
    offloaded = {**ZERO3_FULL, "deepspeed": "examples/deepspeed/ds_z3_offload_config.json"}
    facts = _facts(offloaded, answers=ANSWERED)
    assert facts.config.offload_param and not facts.derived.weights_fill_step
    assert diagnose(facts).cause != "weights"


def test_a_lora_step_at_batch_one_is_not_blamed_on_weights_nobody_measured() -> None:
    config = config_from_mapping({"finetuning_type": "lora", "per_device_train_batch_size": 1, "fp16": True})
    d = diagnose(facts_of(config=config, answers=ANSWERED))
    assert d.phase == "first_batch" and d.cause == "activations"
    assert d.proposal is not None and not d.proposal.rule.startswith("weights.")


def test_no_gpu_side_cause_while_the_memory_kind_is_only_assumed() -> None:
    # a traceback cut before its error line while loading: the GPU is assumed, and asked
    log = parse_log_text(
        "Traceback (most recent call last):\n"
        '  File "/src/llamafactory/model/loader.py", line 152, in load_model\n'
        "    model = AutoModelForCausalLM.from_pretrained(**init_kwargs)\n"
        '  File "/site-packages/transformers/modeling_utils.py", line 3531, in from_pretrained\n'
        "    ) = cls._load_pretrained_model(\n"
    )
    config = config_from_mapping(
        {"finetuning_type": "lora", "model_name_or_path": "Qwen/Qwen2.5-32B-Instruct"}
    )
    model = model_from_name(config.model_name_or_path)
    facts = facts_of(config=config, log=log, model=model, answers={"phase": "load"})
    assert facts.derived.memory_kind_source == "assumed"
    d = diagnose(facts)
    assert d.phase == "load" and d.cause == "unknown" and "memory_kind" in [q.key for q in d.questions]
    answered = diagnose(facts.with_answers({"memory_kind": "gpu"}))
    assert answered.cause == "weights"
    assert diagnose(facts.with_answers({"memory_kind": "host"})).cause == "host_ram"


def test_a_huge_request_while_loading_or_in_the_update_is_not_taken_for_the_steps() -> None:
    # DeepSpeed's initialise flattens every parameter into one buffer; a fused update works on flattened tensors
    log = parse_log_text(
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.88 GiB (GPU 4; 7"
    )
    config = config_from_mapping({"finetuning_type": "full", "per_device_train_batch_size": 1})
    for phase in ("load", "optimizer_step"):
        facts = facts_of(config=config, log=log, answers={"phase": phase, "memory_kind": "gpu"})
        assert not facts.derived.request_is_step_tensor
        assert diagnose(facts).proposal is not None
    loading = diagnose(facts_of(config=config, log=log, answers={"phase": "load", "memory_kind": "gpu"}))
    assert "load.full_to_lora" in [loading.proposal.rule, *(a.rule for a in loading.alternatives)]


def test_with_no_log_the_finding_says_what_is_still_open_once_the_phase_is_answered() -> None:
    config = config_from_mapping({"finetuning_type": "lora", "per_device_train_batch_size": 4})
    ids = [f.id for f in diagnose(facts_of(config=config)).findings]
    assert "no_log" in ids
    placed = diagnose(facts_of(config=config, answers={"phase": "eval"}))
    assert "no_log_memory_open" in [f.id for f in placed.findings] and placed.proposal is None
    both = diagnose(facts_of(config=config, answers={"phase": "eval", "memory_kind": "gpu"}))
    assert "no_log_answered" in [f.id for f in both.findings] and both.proposal is not None


ZERO3_GATHER_LOG = """\
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/parameter_offload.py", line 392, in _pre_forward_module_hook
    self.pre_sub_module_forward_function(module)
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/partitioned_param_coordinator.py", line 307, in fetch_sub_module
    self.__all_gather_params(params_to_prefetch, forward)
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/partition_parameters.py", line 1151, in _allgather_params
    flat_tensor = torch.empty(tensor_size, dtype=param_list[0].dtype, device=self.local_device)
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 20.00 MiB is free.
"""


def test_a_gather_frame_says_the_weights_fill_the_step_only_while_their_share_is_unknown() -> None:
    """A ZeRO-3 gather tells the phase; with the estimate's share of the weights known, the share decides."""
    lora = {**ZERO3_FULL, "finetuning_type": "lora", "model_name_or_path": "Qwen/Qwen2.5-7B-Instruct"}
    log = parse_log_text(ZERO3_GATHER_LOG)
    known = _facts(lora, log=log, answers={"phase": "first_batch"}, world_size=8)
    assert known.derived.weights_share is not None and known.derived.weights_share < 0.3
    assert not known.derived.weights_fill_step
    unknown = facts_of(
        config=config_from_mapping({"finetuning_type": "lora"}), log=log, answers={"phase": "first_batch"}
    )
    assert unknown.derived.weights_share is None and unknown.derived.weights_fill_step


def test_the_world_size_question_headless(tmp_path, capsys) -> None:
    """``--answer world_size=N`` on the command line: asked in the JSON contract, then settles the cause."""
    import json

    import yaml

    from oomdoctor.cli import main

    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(ZERO3_FULL), encoding="utf-8")
    words = [
        "diagnose",
        "--config",
        str(config),
        "--answer",
        "phase=first_batch",
        "--answer",
        "memory_kind=gpu",
    ]
    assert main([*words, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["cause"] == "unknown" and "world_size" in [q["key"] for q in out["questions"]]
    assert main([*words, "--answer", "world_size=8", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["cause"] == "activations" and out["facts"]["derived"]["world_size_source"] == "answer"
    assert main([*words, "--answer", "world_size=3", "--json"]) == 2  # not one of the offered counts


# A rank-5 process's OOM in the forward (the shape of LLaMA-Factory#7490's message, on rank 5): six or more
# processes, however many there are.
RANK5_OOM = (
    "[rank5]: Traceback (most recent call last):\n"
    '[rank5]:   File "/opt/LLaMA-Factory/src/llamafactory/train/sft/workflow.py", line 96, in run_sft\n'
    "[rank5]:     train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)\n"
    "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.71 GiB. GPU 5 has a total "
    "capacity of 79.15 GiB of which 1.02 GiB is free.\n"
)


def test_a_rank_number_bounds_the_world_sizes_tried_and_offered() -> None:
    """Review item 3: the terms are compared between the processes a rank number proves and the top of the
    offered range, not from one process; the question offers only counts the rank leaves possible, and an
    answer below them is refused as bad input."""
    import pytest

    from oomdoctor.errors import BadInput
    from oomdoctor.rules.asking import world_size_question_for

    facts = _facts(ZERO3_FULL, log=parse_log_text(RANK5_OOM), answers=ANSWERED)
    assert facts.derived.processes_at_least == 6 and facts.derived.world_size_open
    # from 6 to 64 processes the activations are largest (at 1, never possible here, the optimizer state was)
    assert facts.derived.dominant_by_world == () and facts.derived.dominant_cause == "activations"
    asked = world_size_question_for(_with_conflict(facts), [])
    assert [a.value for a in asked[0].answers] == ["8", "16", "32", "64"]
    with pytest.raises(BadInput, match="world_size=4"):
        _facts(ZERO3_FULL, log=parse_log_text(RANK5_OOM), answers={**ANSWERED, "world_size": "4"})
    eight = _facts(ZERO3_FULL, log=parse_log_text(RANK5_OOM), answers={**ANSWERED, "world_size": "8"})
    assert eight.derived.world_size == 8 and eight.derived.world_size_source == "answer"


def _with_conflict(facts):
    """``facts`` with a conflict by world size set, so that the question is built whatever the terms are."""
    from oomdoctor import records

    derived = records.replace(facts.derived, dominant_by_world=((6, "trainable_state"), (64, "activations")))
    return records.replace(facts, derived=derived)


def test_fsdp_full_shard_gets_the_same_conflict_as_zero3() -> None:
    """Review item 4: an FSDP full-shard config whose world size nothing states is open the same way (one
    definition, derived.world_size_open), and its terms are probed sharded as ZeRO-3 shards them."""
    fsdp = {k: v for k, v in ZERO3_FULL.items() if k != "deepspeed"} | {"fsdp": "full_shard auto_wrap"}
    facts = _facts(fsdp, answers=ANSWERED)
    assert facts.derived.sharded_by == "fsdp" and facts.derived.world_size_open
    assert facts.derived.dominant_cause is None
    assert facts.derived.dominant_by_world == ((1, "trainable_state"), (64, "activations"))
    d = diagnose(facts)
    assert d.cause == "unknown" and any(q.key == "world_size" for q in d.questions)
    said = [f for f in d.findings if f.id == "dominant_by_world"]
    assert said and "FSDP" in said[0].text.en and "FSDP" in said[0].text.zh
    # the estimate shards it as the conflict says: answered, the world size settles the cause the same way
    at_64 = _facts(fsdp, answers={**ANSWERED, "world_size": "64"})
    assert at_64.estimate is not None and at_64.estimate.dominant_term == "activations"
    assert diagnose(at_64).cause == "activations"
    assert diagnose(_facts(fsdp, answers={**ANSWERED, "world_size": "1"})).cause == "optimizer_state"
    plain = {k: v for k, v in ZERO3_FULL.items() if k != "deepspeed"}
    alone = _facts(plain, answers=ANSWERED)
    assert not alone.derived.world_size_open and alone.derived.dominant_by_world == ()


def test_a_non_numeric_size_answer_is_bad_input_on_the_command_line(tmp_path, capsys) -> None:
    """Review item 2: ``card_gb=abc`` and ``world_size=x`` are refused with the one bad-input line and exit
    2 before anything converts them (they used to be an internal ValueError)."""
    import yaml

    from oomdoctor.cli import main

    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(ZERO3_FULL), encoding="utf-8")
    words = ["diagnose", "--config", str(config), "--answer", "phase=first_batch", "--json"]
    for answer in ("card_gb=abc", "world_size=x"):
        assert main([*words, "--answer", answer]) == 2
        err = capsys.readouterr().err
        assert answer in err and "allowed values" in err and "internal error" not in err
        assert len(err.strip().splitlines()) == 1
