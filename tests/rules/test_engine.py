"""The rules engine: loading and its errors (file and line), operators, three-valued conditions, answers,
questions, guards, ranking, concrete changes, the estimated effect and the JSON contract.

Facts are built by hand here (LogFacts directly), so these tests do not depend on the log reader.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from oomdoctor.errors import BadInput
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.types import DataFacts, LogFacts, ModelFacts, OtherProcess
from oomdoctor.rules import operators
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose, evaluate, load_rules
from oomdoctor.rules.loader import RuleLoadError, fact_path_problem
from oomdoctor.rules.model import Condition
from oomdoctor.rules.schema import rules_json_schema, rules_json_schema_text

REPO = Path(__file__).resolve().parents[2]

COURSE = {
    "model_name_or_path": "Qwen/Qwen3-0.6B",
    "stage": "sft",
    "do_train": True,
    "finetuning_type": "lora",
    "dataset": "keywords_train",
    "eval_dataset": "keywords_validation",
    "cutoff_len": 2048,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 8,
    "eval_strategy": "steps",
    "eval_steps": 50,
    "save_steps": 50,
    "fp16": True,
    "output_dir": "saves/x",
}
V100_MIB = 32510.5


def course(**changes: Any) -> Any:
    raw = {**COURSE, **changes}
    return config_from_mapping({k: v for k, v in raw.items() if v is not None})


def gpu_oom(phase: str, **fields: Any) -> LogFacts:
    base = {
        "oom": True,
        "oom_kind": "cuda_oom",
        "ran_out_of": "gpu",
        "phase": phase,
        "requested_mib": 2222.0,
        "capacity_mib": V100_MIB,
        "free_mib": 1200.0,
        "reserved_unallocated_mib": 150.0,
        "weights_loaded": phase != "load",
    }
    base.update(fields)
    return LogFacts(**base)


def rule_ids(d: Any) -> list[str]:
    return ([d.proposal.rule] if d.proposal else []) + [a.rule for a in d.alternatives]


# --- a minimal valid node, for loader tests --------------------------------------------------------------

VALID = """\
id: test.halve
title: {en: "Halve", zh: "减半"}
locates:
  phase: [first_batch]
  cause: activations
when:
  all:
    - {fact: derived.micro_batch, gt: 1}
change:
  per_device_train_batch_size: {halve: true}
why: {en: "why {old.per_device_train_batch_size}", zh: "原因"}
cost: {en: "cost", zh: "代价"}
judge: {en: "judge", zh: "判断"}
rank: 1
docs: {en: "docs", zh: "说明"}
"""


def write_rules(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "rules"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def load_error(tmp_path: Path, files: dict[str, str]) -> RuleLoadError:
    with pytest.raises(RuleLoadError) as info:
        load_rules(write_rules(tmp_path, files))
    return info.value


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_valid_minimal_rule_loads(tmp_path: Path) -> None:
    rules = load_rules(write_rules(tmp_path, {"a.yaml": VALID}))
    assert [n.node.id for n in rules] == ["test.halve"]


def test_unknown_operator_names_file_and_line(tmp_path: Path) -> None:
    text = VALID.replace("{fact: derived.micro_batch, gt: 1}", "{fact: derived.micro_batch, gtt: 1}")
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.file.endswith("a.yaml")
    assert err.line == line_of(text, "gtt")
    assert "gtt" in str(err) and "a.yaml:" in str(err)
    assert "ratio_ge" in str(err)  # the known operators are listed


def test_bad_operand_is_a_load_error(tmp_path: Path) -> None:
    text = VALID.replace("gt: 1}", "gt: [1, 2]}")
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "gt: [1, 2]")


def test_duplicate_id_names_second_file_and_first(tmp_path: Path) -> None:
    err = load_error(tmp_path, {"a.yaml": VALID, "b.yaml": VALID})
    assert err.file.endswith("b.yaml") and err.line == 1
    assert "a.yaml:1" in str(err)


def test_dangling_next_names_line(tmp_path: Path) -> None:
    text = VALID + "next: [test.nowhere]\n"
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "next:")
    assert "test.nowhere" in str(err)


def test_missing_zh_names_line(tmp_path: Path) -> None:
    text = VALID.replace('cost: {en: "cost", zh: "代价"}', 'cost: {en: "cost"}')
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "cost:")
    assert "zh" in str(err) and "cost" in str(err)


def test_empty_en_is_rejected(tmp_path: Path) -> None:
    text = VALID.replace('judge: {en: "judge", zh: "判断"}', 'judge: {en: "", zh: "判断"}')
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "judge:")


def test_unknown_fact_path_names_line(tmp_path: Path) -> None:
    text = VALID.replace("derived.micro_batch", "config.per_device_batch")
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "per_device_batch")
    assert "per_device_batch" in str(err)


def test_unknown_derived_fact_and_fact_reference_are_checked(tmp_path: Path) -> None:
    text = VALID.replace("gt: 1}", "gt: {fact: data.longest}}")
    err = load_error(tmp_path, {"a.yaml": text})
    assert "data.longest" in str(err) and err.line == line_of(text, "data.longest")


def test_misspelt_derived_fact_or_config_key_names_file_and_line(tmp_path: Path) -> None:
    for i, wrong in enumerate(("derived.micro_batsh", "config.raw.save_only_modle")):
        text = VALID.replace("derived.micro_batch", wrong)
        (tmp_path / str(i)).mkdir()
        err = load_error(tmp_path / str(i), {"a.yaml": text})
        assert err.file.endswith("a.yaml") and err.line == line_of(text, wrong) and wrong in str(err)


def test_placeholder_must_name_a_changed_field_or_fact(tmp_path: Path) -> None:
    text = VALID.replace("why {old.per_device_train_batch_size}", "why {old.cutoff_len}")
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "why:") and "cutoff_len" in str(err)


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    text = VALID.replace("rank: 1", "rank: [1")
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line is not None and err.line >= line_of(text, "rank:")


def test_manual_node_cannot_carry_a_change(tmp_path: Path) -> None:
    err = load_error(tmp_path, {"a.yaml": VALID + "manual: true\n"})
    assert "manual" in str(err)


def test_keep_product_must_name_a_changed_field(tmp_path: Path) -> None:
    text = VALID.replace(
        "per_device_train_batch_size: {halve: true}",
        "per_device_train_batch_size: {halve: true}\n  gradient_accumulation_steps: {keep_product_with: cutoff_len}",
    )
    err = load_error(tmp_path, {"a.yaml": text})
    assert "keep_product_with" in str(err)


def test_builtin_question_takes_only_its_key(tmp_path: Path) -> None:
    text = VALID + 'ask: {key: phase, text: {en: "x", zh: "x"}}\n'
    err = load_error(tmp_path, {"a.yaml": text})
    assert err.line == line_of(text, "ask:") and "phase" in str(err)


def test_load_error_is_bad_input_for_the_cli(tmp_path: Path) -> None:
    err = load_error(tmp_path, {"a.yaml": VALID.replace("gt: 1", "gtt: 1")})
    assert isinstance(err, BadInput) and "\n" not in str(err)


def test_bundled_rules_load_and_file_names_are_ids() -> None:
    rules = load_rules()
    assert len(rules) >= 25
    for loaded in rules:
        assert loaded.file.name == f"{loaded.node.id}.yaml"
        assert loaded.node.why.zh and loaded.node.why.en and loaded.node.docs.zh


def test_rules_are_cached_until_a_file_changes(tmp_path: Path) -> None:
    folder = write_rules(tmp_path, {"a.yaml": VALID})
    first = load_rules(folder)
    assert load_rules(folder) is first
    (folder / "a.yaml").write_text(VALID.replace("rank: 1", "rank: 3"), encoding="utf-8")
    assert load_rules(folder).get("test.halve").rank == 3


def test_fact_paths_are_checked_against_the_dataclasses() -> None:
    assert fact_path_problem("config.cutoff_len") is None
    assert fact_path_problem("estimate.terms.logits_loss") is None
    assert fact_path_problem("env.PYTORCH_CUDA_ALLOC_CONF") is None
    assert fact_path_problem("config.raw.save_only_model") is None
    assert fact_path_problem("config.raw.task") is None  # `llamafactory-cli eval` reads it
    assert "no config key" in (fact_path_problem("config.raw.save_only_modle") or "")
    assert fact_path_problem("derived.processes_at_least") is None
    assert "known: " in (fact_path_problem("derived.world_sise") or "")
    assert fact_path_problem("config.cutof_len") is not None
    assert fact_path_problem("gpus.first") is not None
    assert fact_path_problem("derived.nothing") is not None
    assert fact_path_problem("answers") is not None


# --- operators and conditions -----------------------------------------------------------------------------


def _facts() -> Any:
    return facts_of(
        config=course(), log=gpu_oom("first_batch"), env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}
    )


@pytest.mark.parametrize(
    ("leaf", "expected"),
    [
        ({"fact": "config.cutoff_len", "is": 2048}, True),
        ({"fact": "config.finetuning_type", "is": "LoRA"}, True),  # strings compare case-insensitively
        ({"fact": "config.fp16", "is": 1}, False),  # a bool never equals a number
        ({"fact": "config.cutoff_len", "is_not": 2048}, False),
        ({"fact": "config.finetuning_type", "in": ["full", "lora"]}, True),
        ({"fact": "config.finetuning_type", "not_in": ["full", "freeze"]}, True),
        ({"fact": "config.cutoff_len", "gt": 2048}, False),
        ({"fact": "config.cutoff_len", "ge": 2048}, True),
        ({"fact": "config.cutoff_len", "lt": 4096}, True),
        ({"fact": "config.cutoff_len", "le": 1024}, False),
        ({"fact": "config.quantization_bit", "known": True}, False),
        ({"fact": "config.quantization_bit", "unknown": True}, True),
        ({"fact": "config.quantization_bit", "gt": 1}, None),  # unknown fact: unknown answer
        ({"fact": "env.PYTORCH_CUDA_ALLOC_CONF", "contains": "MAX_SPLIT"}, True),
        ({"fact": "config.dataset", "contains": "keywords_train"}, True),
        ({"fact": "config.dataset", "contains_any": ["nothing", "keywords"]}, True),
        ({"fact": "log.requested_mib", "ratio_ge": {"of": "log.capacity_mib", "value": 0.05}}, True),
        ({"fact": "log.requested_mib", "ratio_gt": {"of": "log.capacity_mib", "value": 1.0}}, False),
        ({"fact": "log.requested_mib", "ratio_lt": {"of": "log.capacity_mib", "value": 0.1}}, True),
        (
            {"fact": "log.requested_mib", "ratio_le": {"of": "data.max_tokens", "value": 0.1}},
            None,
        ),  # base unknown
        (
            {
                "fact": "config.per_device_eval_batch_size",
                "gt": {"fact": "config.per_device_train_batch_size"},
            },
            True,
        ),
        ({"fact": "config.cutoff_len", "ge": {"fact": "data.max_tokens"}}, None),  # reference unknown
    ],
)
def test_operators(leaf: dict[str, Any], expected: bool | None) -> None:
    assert evaluate(Condition.model_validate(leaf), _facts()) is expected


def test_three_valued_all_any_not() -> None:
    facts = _facts()
    true, false, unknown = (
        {"fact": "config.fp16", "is": True},
        {"fact": "config.bf16", "is": True},
        {"fact": "config.quantization_bit", "is": 4},
    )

    def ev(tree: dict[str, Any]) -> bool | None:
        return evaluate(Condition.model_validate(tree), facts)

    assert ev({"all": [true, unknown]}) is None
    assert ev({"all": [false, unknown]}) is False
    assert ev({"any": [true, unknown]}) is True
    assert ev({"any": [false, unknown]}) is None
    assert ev({"not": unknown}) is None
    assert ev({"not": false}) is True


def test_operator_registry_matches_schema() -> None:
    schema = rules_json_schema()
    leaf = schema["$defs"]["Condition"]["oneOf"][3]
    assert set(leaf["properties"]) == {"fact", *operators.OPERATORS}


# --- the committed JSON schema ----------------------------------------------------------------------------


def test_committed_schema_equals_generated() -> None:
    committed = (REPO / "rules.schema.json").read_text(encoding="utf-8")
    assert committed == rules_json_schema_text(), "run: python -m oomdoctor.rules.schema"


def test_bundled_rules_validate_against_the_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(rules_json_schema())
    for path in sorted((REPO / "rules").glob("*.yaml")):
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8"))))
        assert not errors, f"{path.name}: {errors[0].message}"
    broken = yaml.safe_load((REPO / "rules" / "eval.halve_eval_batch.yaml").read_text(encoding="utf-8"))
    broken["when"]["all"][0] = {"fact": "derived.memory_kind", "gtt": 1}
    assert list(validator.iter_errors(broken))


# --- answers and questions --------------------------------------------------------------------------------


def test_unknown_answer_key_lists_questions() -> None:
    with pytest.raises(BadInput) as info:
        diagnose(facts_of(config=course(), answers={"stage": "eval"}))
    assert "phase" in str(info.value) and "\n" not in str(info.value)


def test_bad_answer_value_lists_allowed() -> None:
    with pytest.raises(BadInput) as info:
        diagnose(facts_of(config=course(), answers={"phase": "middle"}))
    assert "first_batch" in str(info.value) and "long_sample" in str(info.value)


def test_without_log_the_memory_kind_then_the_phase_is_asked() -> None:
    d = diagnose(facts_of(config=course()))
    assert d.oom and d.phase == "unknown" and d.cause == "unknown" and d.proposal is None
    # "GPU or host memory?" and where, together (a host-RAM failure has its own changes in every phase);
    # not whether the weights loaded: the phase's answer settles it
    assert [q.key for q in d.questions] == ["memory_kind", "phase"]
    d = diagnose(facts_of(config=course(), answers={"memory_kind": "gpu"}))
    assert d.proposal is None and d.cause == "unknown"
    assert [q.key for q in d.questions] == ["phase"]
    phase_q = d.questions[0]
    assert phase_q.allowed == ["load", "first_batch", "long_sample", "eval", "save", "optimizer_step"]
    assert all(a.label["zh"] and a.label["en"] for a in phase_q.answers)
    assert "no_log" in {f.id for f in d.findings}


def test_answered_phase_gives_a_proposal() -> None:
    d = diagnose(facts_of(config=course(), answers={"phase": "first_batch", "memory_kind": "gpu"}))
    assert d.phase == "first_batch" and d.proposal is not None
    assert d.proposal.rule == "first_batch.halve_micro_batch"
    assert d.proposal.changes == {
        "per_device_train_batch_size": [4, 2],
        "gradient_accumulation_steps": [8, 16],
    }


def test_weights_not_loaded_means_load_phase() -> None:
    d = diagnose(facts_of(config=course(), answers={"weights_loaded": "no"}))
    assert d.phase == "load"


def test_question_asked_only_when_an_answer_could_match() -> None:
    # Phase answered, memory unknown: the load nodes need memory_kind, so it is asked.
    d = diagnose(facts_of(config=course(), answers={"phase": "load"}))
    assert "memory_kind" in [q.key for q in d.questions]
    # Answering it gives a proposal and no more question about it.
    d = diagnose(facts_of(config=course(), answers={"phase": "load", "memory_kind": "host"}))
    assert "memory_kind" not in [q.key for q in d.questions]
    assert d.proposal is not None and d.proposal.rule == "host_ram.loading_weights" and d.cause == "host_ram"
    # Phase unknown: no node could match whatever the card is, so card_bf16 is not asked.
    d = diagnose(facts_of(config=course()))
    assert "card_bf16" not in [q.key for q in d.questions]


def test_no_oom_in_log() -> None:
    d = diagnose(facts_of(config=course(), log=LogFacts(oom=False, phase="none")))
    assert not d.oom and d.phase == "none" and d.proposal is None and d.alternatives == []
    assert d.findings[0].id == "no_oom"


# --- guards, ranking, changes ---------------------------------------------------------------------------


def test_gradient_checkpointing_default_is_a_finding_not_a_proposal() -> None:
    d = diagnose(facts_of(config=course(per_device_train_batch_size=1), log=gpu_oom("first_batch")))
    assert "activations.enable_gradient_checkpointing" not in rule_ids(d)
    guard = next(f for f in d.findings if f.id == "guard.activations.enable_gradient_checkpointing")
    assert "default" in guard.text["en"] and "默认" in guard.text["zh"]
    assert d.proposal is not None and guard.text in d.proposal.already_on


def test_gradient_checkpointing_off_is_proposed_by_removing_the_key() -> None:
    d = diagnose(
        facts_of(
            config=course(per_device_train_batch_size=1, disable_gradient_checkpointing=True),
            log=gpu_oom("first_batch"),
        )
    )
    proposal = next(
        p for p in [d.proposal, *d.alternatives] if p.rule == "activations.enable_gradient_checkpointing"
    )
    assert proposal.changes == {"disable_gradient_checkpointing": [True, None]}


def test_ranking_proposal_first_then_alternatives_in_rank_order() -> None:
    # 4000 MiB of the 32 GB card unused in pieces: a real share (fragmentation's rule asks for 8 %)
    log = gpu_oom("first_batch", frames=["forward", "cross_entropy"], reserved_unallocated_mib=4000.0)
    d = diagnose(facts_of(config=course(), log=log))
    ids = rule_ids(d)
    # The course's order: the batch first; the allocator setting is the next option, then the fused loss.
    assert ids[:2] == ["first_batch.halve_micro_batch", "fragmentation.expandable_segments"]
    assert ids.index("fragmentation.expandable_segments") < ids.index("logits.liger_fused_loss")
    ranks = [load_rules().get(i).rank for i in ids]
    assert ranks == sorted(ranks)
    fragmentation = d.alternatives[0]
    assert (
        fragmentation.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
        and fragmentation.changes == {}
    )


def test_fragmentation_guard_when_already_set() -> None:
    log = gpu_oom("first_batch", reserved_unallocated_mib=4000.0)
    d = diagnose(
        facts_of(config=course(), log=log, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    )
    assert "fragmentation.expandable_segments" not in rule_ids(d)
    assert any(f.id == "guard.fragmentation.expandable_segments" for f in d.findings)


def test_halving_floors_at_one_and_keeps_the_product() -> None:
    d = diagnose(
        facts_of(
            config=course(per_device_train_batch_size=3, gradient_accumulation_steps=4),
            log=gpu_oom("first_batch"),
        )
    )
    assert d.proposal.changes == {
        "per_device_train_batch_size": [3, 1],
        "gradient_accumulation_steps": [4, 12],
    }


def test_inexact_product_is_reported() -> None:
    d = diagnose(
        facts_of(
            config=course(per_device_train_batch_size=5, gradient_accumulation_steps=3),
            log=gpu_oom("first_batch"),
        )
    )
    assert d.proposal.changes == {
        "per_device_train_batch_size": [5, 2],
        "gradient_accumulation_steps": [3, 8],
    }
    note = next(f for f in d.findings if f.id.endswith("inexact_product"))
    assert "15" in note.text["en"] and "16" in note.text["en"]


def test_eval_spike_never_touches_the_training_batch() -> None:
    d = diagnose(facts_of(config=course(), log=gpu_oom("eval")))
    assert d.proposal.rule == "eval.match_train_micro_batch" and d.cause == "eval_batch"
    assert d.proposal.changes == {"per_device_eval_batch_size": [8, 4]}
    for p in [d.proposal, *d.alternatives]:
        assert "per_device_train_batch_size" not in p.changes
    assert any(f.id == "eval_batch_default" for f in d.findings)


def test_deepspeed_template_is_read_and_attached() -> None:
    log = gpu_oom("optimizer_step", world_size=8)
    config = config_from_mapping(
        {**COURSE, "finetuning_type": "full", "deepspeed": "ds_z2_config.json"}, world_size=8
    )
    d = diagnose(facts_of(config=config, log=log))
    assert d.proposal.rule == "optimizer_step.shard_with_zero3"
    assert d.proposal.changes == {"deepspeed": ["ds_z2_config.json", "ds_z3_config.json"]}
    assert d.proposal.files["ds_z3_config.json"]["zero_optimization"]["stage"] == 3


def test_lora_optimizer_offload_is_guarded_with_the_course_reason() -> None:
    d = diagnose(facts_of(config=course(), log=gpu_oom("optimizer_step")))
    assert "optimizer_step.offload_optimizer" not in rule_ids(d)
    guard = next(f for f in d.findings if f.id == "guard.optimizer_step.offload_optimizer")
    assert "LoRA" in guard.text["en"] and "LoRA" in guard.text["zh"]


def test_other_process_listed_under_host_pid_is_not_counted() -> None:
    # A container: the failing process appears as "Process 17949" with what PyTorch reserved.
    log = gpu_oom(
        "eval",
        capacity_mib=24218.0,
        free_mib=2580.0,
        requested_mib=3246.0,
        allocated_mib=18145.0,
        reserved_unallocated_mib=3010.0,
        other_processes=[OtherProcess(pid=17949, used_mib=21617.0)],
    )
    d = diagnose(facts_of(config=course(), log=log))
    assert "other_process.free_the_card" not in rule_ids(d)
    assert any(f.id == "self_listed" and "17949" in f.text["en"] for f in d.findings)


def test_other_process_with_this_process_line_is_counted() -> None:
    log = gpu_oom(
        "first_batch",
        capacity_mib=32491.0,
        free_mib=24.7,
        requested_mib=136.0,
        process_in_use_mib=15073.0,
        allocated_mib=14756.0,
        reserved_unallocated_mib=11.0,
        other_processes=[OtherProcess(pid=149826, used_mib=17388.0)],
    )
    d = diagnose(facts_of(config=course(), log=log))
    assert d.proposal.rule == "other_process.free_the_card" and d.proposal.manual
    assert d.cause == "other_process" and d.proposal.changes == {}
    assert "149826" in d.proposal.why["en"] and "149826" in d.proposal.why["zh"]


def test_small_sibling_contexts_are_not_another_process() -> None:
    log = gpu_oom(
        "first_batch",
        world_size=4,
        process_in_use_mib=30000.0,
        other_processes=[OtherProcess(pid=11, used_mib=420.0), OtherProcess(pid=12, used_mib=420.0)],
    )
    d = diagnose(facts_of(config=course(), log=log))
    assert "other_process.free_the_card" not in rule_ids(d)


def test_request_larger_than_the_card_is_not_tuning() -> None:
    log = gpu_oom("first_batch", requested_mib=40000.0)
    d = diagnose(facts_of(config=course(), log=log))
    assert d.proposal.rule == "request_exceeds_card.config_error" and d.proposal.manual
    assert d.cause == "request_exceeds_card"


def test_bf16_on_a_card_without_bf16_and_the_question() -> None:
    config = course(fp16=None, bf16=True)
    d = diagnose(facts_of(config=config, log=gpu_oom("first_batch")))
    assert "card_bf16" in [q.key for q in d.questions]
    d = diagnose(facts_of(config=config, log=gpu_oom("first_batch"), answers={"card_bf16": "no"}))
    assert d.proposal.rule == "precision.bf16_on_card_without_bf16"
    assert d.proposal.changes == {
        "bf16": [True, False],
        "fp16": [False, True],
    }  # pure_bf16 already off: no change


def test_cutoff_is_never_lowered_without_lengths() -> None:
    d = diagnose(facts_of(config=course(per_device_train_batch_size=1), log=gpu_oom("long_sample")))
    assert "long_sample.lower_cutoff" not in rule_ids(d)
    assert "long_sample.measure_lengths" in rule_ids(d)


def test_cutoff_above_longest_saves_nothing() -> None:
    data = DataFacts(source="given", max_tokens=957)
    d = diagnose(
        facts_of(config=course(per_device_train_batch_size=1), log=gpu_oom("long_sample"), data=data)
    )
    assert "long_sample.lower_cutoff" not in rule_ids(d)
    finding = next(f for f in d.findings if f.id == "cutoff_above_longest")
    assert "957" in finding.text["en"] and "2048" in finding.text["zh"]


def test_cutoff_from_p99_says_how_many_are_cut() -> None:
    data = DataFacts(
        source="tokenized", samples=1600, max_tokens=3000, p99_tokens=1500, cutoff_len=1504, truncated=15
    )
    d = diagnose(
        facts_of(config=course(per_device_train_batch_size=1), log=gpu_oom("long_sample"), data=data)
    )
    proposal = next(p for p in [d.proposal, *d.alternatives] if p.rule == "long_sample.lower_cutoff")
    assert proposal.changes == {"cutoff_len": [2048, 1504]}
    assert "15 of 1600" in proposal.cost["en"]


def test_requirement_is_checked_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    log = gpu_oom("first_batch", frames=["cross_entropy"])
    d = diagnose(facts_of(config=course(per_device_train_batch_size=1), log=log))
    liger = next(p for p in [d.proposal, *d.alternatives] if p.rule == "logits.liger_fused_loss")
    assert liger.changes == {"enable_liger_kernel": [False, True]}
    assert any("liger-kernel" in r["en"] for r in liger.requires)
    assert "liger_kernel" not in sys.modules


def test_log_only_diagnosis_uses_the_log_values() -> None:
    log = gpu_oom("first_batch", instantaneous_batch_size=4, gradient_accumulation_steps=8, world_size=1)
    d = diagnose(facts_of(log=log))
    assert d.proposal.rule == "first_batch.halve_micro_batch"
    assert d.proposal.changes == {
        "per_device_train_batch_size": [4, 2],
        "gradient_accumulation_steps": [8, 16],
    }
    assert any(f.id == "log_only" for f in d.findings)


def test_texts_are_rendered_in_both_languages() -> None:
    d = diagnose(facts_of(config=course(), log=gpu_oom("first_batch")))
    for text in (d.proposal.title, d.proposal.why, d.proposal.cost, d.proposal.judge):
        assert set(text) == {"en", "zh"} and "{" not in text["en"] and "{" not in text["zh"]
    assert "2" in d.proposal.why["zh"] and "16" in d.proposal.why["en"]


QWEN3_06B = ModelFacts(
    name="Qwen/Qwen3-0.6B",
    hidden_size=1024,
    num_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=3072,
    vocab_size=151936,
    tie_word_embeddings=True,
    params=596049920,
    torch_dtype="bfloat16",
)


@pytest.mark.parametrize(("phase", "estimate_phase"), [("first_batch", "train"), ("eval", "eval")])
def test_effect_is_estimated_in_the_phase_that_ran_out(phase: str, estimate_phase: str) -> None:
    from oomdoctor.estimate import estimate

    config = course()
    data = DataFacts(source="given", max_tokens=957)
    est = estimate(config, QWEN3_06B, data=data, gpu_total_mib=V100_MIB)
    d = diagnose(
        facts_of(
            config=config,
            log=gpu_oom(phase),
            model=QWEN3_06B,
            data=data,
            estimate=est,
            capacity_mib=V100_MIB,
        )
    )
    effect = d.proposal.effect
    assert effect is not None and effect.before_mib == est.phases[estimate_phase]
    assert effect.after_mib is not None and effect.after_mib < effect.before_mib
    assert effect.note is not None and effect.note["en"] and effect.note["zh"]


def test_effect_says_when_another_phase_holds_the_peak() -> None:
    from oomdoctor.estimate import estimate

    config, data = course(), DataFacts(source="given", max_tokens=957)
    est = estimate(config, QWEN3_06B, data=data, gpu_total_mib=V100_MIB)
    assert est.phases["eval"] > est.phases["train"]  # the default eval batch of 8 is the larger peak
    d = diagnose(
        facts_of(
            config=config,
            log=gpu_oom("first_batch"),
            model=QWEN3_06B,
            data=data,
            estimate=est,
            capacity_mib=V100_MIB,
        )
    )
    effect = d.proposal.effect
    assert effect.fits_after is None
    assert "evaluation" in effect.note["en"] and "验证" in effect.note["zh"]


def test_no_effect_without_a_model() -> None:
    d = diagnose(facts_of(config=course(), log=gpu_oom("first_batch")))
    assert d.proposal.effect is None


# --- the JSON contract --------------------------------------------------------------------------------------


def test_json_contract_keys() -> None:
    d = diagnose(facts_of(config=course(), log=gpu_oom("first_batch", step=1)))
    out = json.loads(json.dumps(d.to_json()))
    for key in (
        "oom",
        "phase",
        "cause",
        "step",
        "requested_mib",
        "capacity_mib",
        "free_mib",
        "reserved_unallocated_mib",
        "findings",
        "proposal",
        "alternatives",
        "questions",
    ):
        assert key in out
    assert out["step"] == 1 and out["requested_mib"] == 2222.0
    for key in ("rule", "changes", "why", "cost", "judge"):
        assert key in out["proposal"]
    assert out["proposal"]["changes"]["per_device_train_batch_size"] == [4, 2]
    d = diagnose(facts_of(config=course(), answers={"memory_kind": "gpu"}))
    q = d.to_json()["questions"][0]
    assert q["key"] == "phase" and "first_batch" in q["allowed"]


def test_engine_import_pulls_no_heavy_module() -> None:
    code = (
        "import sys, json\n"
        "import oomdoctor.rules.engine as e\n"
        "e.load_rules()\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not loaded & {"textual", "torch", "transformers", "datasets", "llamafactory"}


def test_every_dynamic_message_exists_in_both_languages() -> None:
    from oomdoctor.facts.types import CAUSES, PHASES
    from oomdoctor.i18n import MESSAGES
    from oomdoctor.rules.engine import ESTIMATE_PHASE
    from oomdoctor.rules.questions import BUILTIN_QUESTIONS

    keys = [f"phase_{p}" for p in PHASES] + [f"cause_{c}" for c in CAUSES]
    keys += [f"estimate_phase_{p}" for p in set(ESTIMATE_PHASE.values())]
    for question, values in BUILTIN_QUESTIONS.items():
        keys += [f"q_{question}"] + [f"q_{question}_{v}" for v in values]
    for key in keys:
        assert MESSAGES[key]["en"] and MESSAGES[key]["zh"], key


# --- second pass: facts a pasted excerpt implies, questions one tier at a time, a proposal at every phase ---


def test_fallback_node_must_be_manual_advice(tmp_path: Path) -> None:
    err = load_error(tmp_path, {"a.yaml": VALID + "fallback: true\n"})
    assert "fallback" in str(err)


def test_fallback_is_offered_only_when_nothing_else_matches(tmp_path: Path) -> None:
    fallback = (
        VALID.replace("id: test.halve", "id: test.fallback")
        .replace("change:\n  per_device_train_batch_size: {halve: true}\n", "manual: true\nfallback: true\n")
        .replace("    - {fact: derived.micro_batch, gt: 1}", "    - {fact: derived.memory_kind, is: gpu}")
        .replace("rank: 1", "rank: 99")
        .replace('why: {en: "why {old.per_device_train_batch_size}"', 'why: {en: "why"')
    )
    folder = write_rules(tmp_path, {"a.yaml": VALID, "b.yaml": fallback})
    rules = load_rules(folder)
    answers = {"phase": "first_batch", "memory_kind": "gpu"}
    d = diagnose(facts_of(config=course(), answers=answers), rules)
    assert rule_ids(d) == ["test.halve"]
    d = diagnose(facts_of(config=course(per_device_train_batch_size=1), answers=answers), rules)
    assert rule_ids(d) == ["test.fallback"] and d.proposal.manual


def test_world_size_from_what_states_it_and_a_rank_only_as_a_lower_bound() -> None:
    def settled(**fields: Any) -> Any:
        d = diagnose(facts_of(log=gpu_oom("first_batch", **fields))).facts["derived"]
        return d["world_size"], d["processes_at_least"]

    assert settled(gpu_index=5) == (None, 6)  # an OOM on "GPU 5": local rank 5, six or more processes
    assert settled(rank=2, gpu_index=0) == (None, 3)  # [rank2]: three or more processes, how many unsaid
    banner = {"instantaneous_batch_size": 2, "gradient_accumulation_steps": 4, "total_train_batch_size": 64}
    assert settled(**banner) == (8, 8)  # the banner's total is batch x accumulation x processes
    assert settled(world_size=2, gpu_index=5) == (2, 2)  # the banner's own count wins
    assert settled(gpu_index=0) == (None, 1)


def test_finetuning_type_a_pasted_excerpt_implies() -> None:
    def kind(config: Any, log: LogFacts) -> Any:
        return diagnose(facts_of(config=config, log=log)).facts["derived"]["finetuning_type"]

    partial = config_from_mapping({"per_device_train_batch_size": 1})
    adam = gpu_oom("optimizer_step", requested_mib=3215.0)
    assert kind(partial, adam) == "full"  # a 3 GiB Adam temporary is no adapter's
    assert kind(partial, gpu_oom("optimizer_step", requested_mib=20.0)) == "lora"  # LLaMA-Factory's default
    assert kind(course(), adam) == "lora"  # the user's config says so
    shares = gpu_oom("first_batch", trainable_params=6_738_415_616, all_params=6_738_415_616)
    assert kind(partial, shares) == "full"


def test_card_bf16_from_a_card_name() -> None:
    from oomdoctor.rules.derive import bf16_of_card_name

    assert bf16_of_card_name("Tesla V100-SXM2-32GB") is False
    assert bf16_of_card_name("V100") is False  # the family: both V100 sizes agree
    assert bf16_of_card_name("NVIDIA A100-SXM4-80GB") is True
    assert bf16_of_card_name("A100") is True
    assert bf16_of_card_name("NVIDIA GeForce RTX 4090") is True
    assert bf16_of_card_name("Quadro P9000") is None
    assert bf16_of_card_name("16GB") is None  # a size names no card


def test_cut_traceback_memory_kind() -> None:
    def kind(phase: str, frames: list[str] | None = None) -> tuple[Any, Any]:
        log = LogFacts(oom=False, phase=phase, traceback_cut=True, frames=frames or [])
        d = diagnose(facts_of(config=course(), log=log)).facts["derived"]
        return d["memory_kind"], d["memory_kind_source"]

    for phase in ("first_batch", "long_sample", "eval", "optimizer_step"):
        assert kind(phase) == ("gpu", "traceback")
    assert kind("load") == ("gpu", "assumed")
    assert kind("save") == ("gpu", "assumed")
    assert kind("save", ["save_model", "_alloc_padded_unsharded_flat_param"]) == ("gpu", "traceback")


def test_questions_come_one_tier_at_a_time() -> None:
    config = course(fp16=None, bf16=True, per_device_train_batch_size=1, gradient_accumulation_steps=32)
    asked = [q.key for q in diagnose(facts_of(config=config)).questions]
    assert asked == ["memory_kind", "phase"]
    asked = [q.key for q in diagnose(facts_of(config=config, answers={"memory_kind": "gpu"})).questions]
    assert asked == ["phase"]
    # one of the pair answered (a user may skip the other), the other is still asked
    asked = [q.key for q in diagnose(facts_of(config=config, answers={"phase": "first_batch"})).questions]
    assert asked == ["memory_kind"]
    answers = {"phase": "first_batch", "memory_kind": "gpu"}
    d = diagnose(facts_of(config=config, answers=answers))
    assert [q.key for q in d.questions] == ["card_bf16"] and d.proposal is not None
    assert d.questions[0].asked_by == "precision.bf16_on_card_without_bf16"  # what "no" would propose
    d = diagnose(facts_of(config=config, answers={**answers, "card_bf16": "no"}))
    assert d.questions == [] and d.proposal.rule == "precision.bf16_on_card_without_bf16"


def test_the_phase_is_asked_beside_a_proposal_it_cannot_change_when_it_picks_the_alternative() -> None:
    # Another process holds half the card: that is the advice wherever it stopped, but what to change in the
    # run if the card cannot be freed depends on where it ran out (asking._phase_beside).
    log = gpu_oom(
        "unknown",
        other_processes=[OtherProcess(pid=149826, used_mib=17387.5)],
        allocated_mib=1000.0,
        process_in_use_mib=1300.0,  # "this process has": the listed one is another job's
    )
    d = diagnose(facts_of(config=course(), log=log))
    assert d.proposal.rule == "other_process.free_the_card" and d.alternatives == []
    assert [q.key for q in d.questions] == ["phase"]
    d = diagnose(facts_of(config=course(), log=log, answers={"phase": "first_batch"}))
    assert d.proposal.rule == "other_process.free_the_card" and d.questions == []
    assert [a.rule for a in d.alternatives][:1] == ["first_batch.halve_micro_batch"]


def test_a_question_whose_answers_change_nothing_is_not_asked() -> None:
    # A load-phase cut traceback: frames alone are no evidence of an OOM, so nothing is proposed until the
    # memory is named, and "host" would change the advice: only that is asked (not the phase the frames give).
    load = LogFacts(oom=False, phase="load", traceback_cut=True, weights_loaded=False)
    d = diagnose(facts_of(config=course(), log=load))
    assert not d.oom and d.phase == "load" and d.proposal is None
    assert [q.key for q in d.questions] == ["memory_kind"]
    named = diagnose(facts_of(config=course(), log=load, answers={"memory_kind": "gpu"}))
    assert named.oom and named.proposal is not None and named.questions == []


def test_the_same_change_is_offered_once() -> None:
    log = LogFacts(oom=False, phase="eval", traceback_cut=True, frames=["evaluation_loop", "nested_concat"])
    d = diagnose(facts_of(config=course(compute_accuracy=True), log=log, answers={"memory_kind": "gpu"}))
    assert d.proposal is not None and d.proposal.rule == "eval.predictions_pile_up"
    assert "eval.offload_predictions" not in rule_ids(
        d
    )  # it would write the very same eval_accumulation_steps


PHASES_AFTER_ANSWER = ("load", "first_batch", "long_sample", "eval", "save", "optimizer_step")


@pytest.mark.parametrize(
    "raw",
    [
        COURSE,
        {**COURSE, "finetuning_type": "full", "per_device_train_batch_size": 1},
        {
            **COURSE,
            "per_device_train_batch_size": 1,
            "quantization_bit": 4,
            "enable_liger_kernel": True,
            "save_only_model": True,
            "per_device_eval_batch_size": 1,
            "eval_accumulation_steps": 1,
        },
        {
            **COURSE,
            "do_train": False,
            "do_predict": True,
            "predict_with_generate": True,
            "per_device_eval_batch_size": 1,
            "eval_accumulation_steps": 1,
        },
        None,
    ],
    ids=["course", "full-batch-1", "everything-on", "predict", "no-config"],
)
def test_every_located_gpu_oom_ends_with_a_proposal(raw: dict[str, Any] | None) -> None:
    config = config_from_mapping(raw) if raw is not None else None
    for phase in PHASES_AFTER_ANSWER:
        d = diagnose(
            facts_of(config=config, answers={"phase": phase, "memory_kind": "gpu", "card_bf16": "yes"})
        )
        assert d.phase == phase and d.proposal is not None, f"{phase}: no proposal"
        # no cause is said only for a precision change, or while a node's own question could name another
        # (with no log and no model, whether a load was a resume restoring the optimizer state)
        asked = [q.key for q in d.questions]
        assert d.cause != "unknown" or d.proposal.rule.startswith("precision.") or asked, (
            phase,
            d.proposal.rule,
        )


# The shape of huggingface/sentence-transformers#3214: a hyperparameter-search trial runs out in its optimizer
# step while the earlier trials' models are still on the card.
_HPO_OPTIMIZER_STEP = """\
Traceback (most recent call last):
  File "../src/try.py", line 462, in <module>
    best_trial = trainer.hyperparameter_search(
  File "../myenv/lib/python3.11/site-packages/transformers/trainer.py", line 3565, in hyperparameter_search
    best_run = backend_obj.run(self, n_trials, direction, **kwargs)
  File "../myenv/lib/python3.11/site-packages/transformers/trainer.py", line 2171, in train
    return inner_training_loop(
  File "../myenv/lib/python3.11/site-packages/transformers/trainer.py", line 2584, in _inner_training_loop
    self.optimizer.step()
  File "../myenv/lib/python3.11/site-packages/torch/optim/adamw.py", line 220, in step
    adamw(
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.46 GiB. GPU 0 has a total capacity of 23.64 GiB of which 1.01 GiB is free.
"""


def test_a_rule_naming_its_own_cause_keeps_it_in_the_optimizer_step() -> None:
    """The optimizer step's cause (its state) yields to a node that names its cause wherever the memory ran out
    (the search's frames show the earlier trials' models); the same step without them stays the optimizer's."""
    from oomdoctor.facts.log import parse_log_text

    hpo = diagnose(facts_of(log=parse_log_text(_HPO_OPTIMIZER_STEP)))
    assert hpo.phase == "optimizer_step" and hpo.proposal is not None
    assert hpo.proposal.rule == "weights.hpo_trials_keep_models" and hpo.cause == "weights"
    plain_log = "\n".join(
        line for line in _HPO_OPTIMIZER_STEP.splitlines() if "hyperparameter_search" not in line
    )
    plain = diagnose(facts_of(log=parse_log_text(plain_log)))
    assert plain.phase == "optimizer_step" and plain.cause == "optimizer_state"


def test_phase_any_is_every_phase_and_names_its_cause_there(tmp_path: Path) -> None:
    """``locates.phase: any`` is every phase, the unknown one included, with the cause standing in each;
    ``unknown`` in a list only adds the unknown phase; ``any`` inside a list is a load error."""
    from oomdoctor.rules.model import NODE_PHASES

    for name in ("any", "listed", "in_list", "denied"):
        (tmp_path / name).mkdir()
    anywhere = VALID.replace("phase: [first_batch]", "phase: any")
    (node,) = load_rules(write_rules(tmp_path / "any", {"a.yaml": anywhere}))
    assert node.node.locates.phase == NODE_PHASES and node.node.locates.cause_in_any_phase
    listed = VALID.replace("phase: [first_batch]", "phase: [first_batch, unknown]")
    (node,) = load_rules(write_rules(tmp_path / "listed", {"a.yaml": listed}))
    assert node.node.locates.phase == ("first_batch", "unknown") and not node.node.locates.cause_in_any_phase
    in_list = VALID.replace("phase: [first_batch]", "phase: [first_batch, any]")
    assert load_error(tmp_path / "in_list", {"a.yaml": in_list}).line == line_of(in_list, "phase:")
    denied = anywhere.replace("cause: activations", "cause: activations\n  cause_in_any_phase: false")
    assert "cause_in_any_phase" in str(load_error(tmp_path / "denied", {"a.yaml": denied}))


def test_the_rules_that_name_their_own_cause_say_so() -> None:
    """The shipped rules whose own evidence names the cause (another process, a request bigger than the card,
    the host's RAM, a gather frame, a search's trials) say it in their schema; resuming an optimizer's state
    locates the unknown phase and no more."""
    by_id = {loaded.node.id: loaded.node.locates for loaded in load_rules()}
    own = {rule for rule, locates in by_id.items() if locates.cause_in_any_phase}
    assert {"other_process.free_the_card", "request_exceeds_card.config_error", "host_ram.killed_in_training",
            "weights.gather_for_generation", "weights.hpo_trials_keep_models"} <= own  # fmt: skip
    resume = by_id["load.resume_restores_optimizer"]
    assert "unknown" in resume.phase and not resume.cause_in_any_phase
