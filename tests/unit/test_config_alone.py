"""With no log, what the config alone tells (rules/derive._phase): a config that runs no training step, whose
weights fit the card, ran out in evaluation (with no card size it may as well have run out loading: asked); weights that alone are more than the card ran out while loading. Which memory ran out is still
asked before any GPU-side change (issue 8 item 6), and no GPU-side cause is said until it is answered."""

from __future__ import annotations

from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.model import model_from_config_dict, model_from_name
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.derive import evaluation_only
from oomdoctor.rules.engine import diagnose

A100_80GB_MIB = 81_559.0


def _config(**fields: object):
    return config_from_mapping({"stage": "sft", "finetuning_type": "lora", **fields})


def test_a_generation_eval_config_with_no_training_is_placed_in_evaluation_and_asks_the_memory() -> None:
    config = _config(
        model_name_or_path="Qwen/Qwen2.5-7B-Instruct",
        eval_dataset="alpaca_en_demo",
        per_device_eval_batch_size=16,
        predict_with_generate=True,
    )
    model = model_from_name(config.model_name_or_path)
    diagnosis = diagnose(facts_of(config=config, model=model, capacity_mib=A100_80GB_MIB))
    # placed, but no GPU-side cause is said while "GPU or host memory?" is open
    assert diagnosis.oom and diagnosis.phase == "eval" and diagnosis.cause == "unknown"
    assert [q.key for q in diagnosis.questions] == ["memory_kind"] and diagnosis.proposal is None
    assert "no_log_config_phase" in [f.id for f in diagnosis.findings]
    answered = diagnose(
        facts_of(config=config, model=model, capacity_mib=A100_80GB_MIB, answers={"memory_kind": "gpu"})
    )
    assert answered.proposal is not None and answered.proposal.rule.startswith("eval.")
    assert answered.cause == "eval_batch"


def test_an_eval_only_config_with_no_card_size_may_have_run_out_loading_and_asks_where() -> None:
    config = _config(
        model_name_or_path="Qwen/Qwen2-72B-Instruct",
        do_predict=True,
        predict_with_generate=True,
        eval_dataset="alpaca_en_demo",
    )
    diagnosis = diagnose(facts_of(config=config, model=model_from_name(config.model_name_or_path)))
    assert diagnosis.phase == "unknown"
    assert "phase" in [q.key for q in diagnosis.questions] or "memory_kind" in [
        q.key for q in diagnosis.questions
    ]
    assert "no_log_config_load_or_eval" in [f.id for f in diagnosis.findings]


def test_what_runs_no_training_step() -> None:
    assert evaluation_only(_config(do_train=False, do_eval=True, eval_dataset="x"))
    assert evaluation_only(_config(do_predict=True, predict_with_generate=True, eval_dataset="x"))
    assert not evaluation_only(_config(do_train=True, predict_with_generate=True, eval_dataset="x"))
    assert not evaluation_only(_config(do_train=True, do_eval=True, val_size=0.1))
    assert not evaluation_only(_config())  # a partial config says nothing either way


def test_weights_bigger_than_the_card_are_placed_at_loading() -> None:
    config = _config(model_name_or_path="meta-llama/Llama-3.1-70B-Instruct", do_train=True)
    model = model_from_name(config.model_name_or_path)
    diagnosis = diagnose(facts_of(config=config, model=model, capacity_mib=A100_80GB_MIB))
    assert diagnosis.oom and diagnosis.phase == "load" and diagnosis.cause == "unknown"
    assert [q.key for q in diagnosis.questions] == ["memory_kind"]
    assert "no_log_weights_exceed" in [f.id for f in diagnosis.findings]
    answered = diagnose(
        facts_of(config=config, model=model, capacity_mib=A100_80GB_MIB, answers={"memory_kind": "gpu"})
    )
    assert answered.phase == "load" and answered.cause == "weights"


def test_weights_that_fit_once_quantised_or_without_a_card_size_leave_the_phase_asked() -> None:
    model = model_from_name("meta-llama/Llama-3.1-70B-Instruct")
    quantised = _config(
        model_name_or_path="meta-llama/Llama-3.1-70B-Instruct", do_train=True, quantization_bit=4
    )
    plain = _config(model_name_or_path="meta-llama/Llama-3.1-70B-Instruct", do_train=True)
    for facts in (
        facts_of(config=quantised, model=model, capacity_mib=A100_80GB_MIB),
        facts_of(config=plain, model=model),
    ):
        diagnosis = diagnose(facts)
        # which memory and where, together
        assert diagnosis.phase == "unknown" and [q.key for q in diagnosis.questions] == [
            "memory_kind",
            "phase",
        ]
        after = diagnose(facts.with_answers({"memory_kind": "gpu"}))
        assert after.phase == "unknown" and [q.key for q in after.questions] == ["phase"]


# Llama-3.1-405B's published config.json (the shape facts/model.py reads from a model folder)
LLAMA_405B = {
    "model_type": "llama",
    "hidden_size": 16384,
    "num_hidden_layers": 126,
    "num_attention_heads": 128,
    "num_key_value_heads": 8,
    "intermediate_size": 53248,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}


def test_weights_beyond_every_card_the_tool_knows_are_placed_at_loading_without_a_card_size() -> None:
    # 405B parameters in 16 bit (~810 GB) are more than the largest card of the table (H200, 141 GB), and
    # LLaMA-Factory puts the whole model on each process's card for training
    model = model_from_config_dict(LLAMA_405B, source="config.json", name="Llama-3.1-405B-Instruct")
    config = _config(model_name_or_path="/models/Llama-3.1-405B-Instruct", do_train=True, bf16=True)
    facts = facts_of(config=config, model=model)
    diagnosis = diagnose(facts)
    assert diagnosis.phase == "load" and facts.derived.phase_source == "weights_size_any_card"
    assert diagnosis.cause == "unknown" and [q.key for q in diagnosis.questions] == ["memory_kind"]
    line = next(f for f in diagnosis.findings if f.id == "no_log_weights_exceed_any_card").text["en"]
    assert "H200" in line
    assert diagnose(facts.with_answers({"memory_kind": "gpu"})).cause == "weights"


def test_weights_sharded_over_an_unstated_world_size_or_that_fit_some_card_leave_the_phase_asked() -> None:
    model = model_from_config_dict(LLAMA_405B, source="config.json", name="Llama-3.1-405B-Instruct")
    zero3 = _config(
        model_name_or_path="/models/Llama-3.1-405B-Instruct",
        do_train=True,
        bf16=True,
        deepspeed="examples/deepspeed/ds_z3_config.json",
    )
    assert diagnose(facts_of(config=zero3, model=model)).phase == "unknown"
    # a 72B model in 16 bit (~136 GiB) fits the H200: no card size, no placement
    name = "Qwen/Qwen2.5-72B-Instruct"
    plain = _config(model_name_or_path=name, do_train=True, bf16=True)
    assert diagnose(facts_of(config=plain, model=model_from_name(name))).phase == "unknown"
