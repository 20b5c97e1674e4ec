"""The case scorer's second verdict: the questions the tool asks answered with what the thread says."""

from __future__ import annotations

from typing import Any

from case_scoring import answer_problems, score_row

# A reporter's config alone (no log): an evaluation during LoRA training ran out; the thread says when.
CASE: dict[str, Any] = {
    "id": "eval-during-training-no-log",
    "source": {"repo": "example/repo", "url": "https://github.com/example/repo/issues/1"},
    "config": {
        "model_name_or_path": "meta-llama/Llama-2-7b-hf",
        "stage": "sft",
        "finetuning_type": "lora",
        "per_device_train_batch_size": 2,
        "per_device_eval_batch_size": 16,
        "do_eval": True,
        "eval_strategy": "steps",
        "eval_steps": 100,
    },
    "no_log": True,
    "log_excerpt": "(no log)",
    "phase": "eval",
    "cause": "eval_batch",
}
ANSWERS = {"phase": "eval", "memory_kind": "gpu"}


def test_without_answers_the_second_verdict_is_the_first() -> None:
    row = score_row(CASE, "t")
    assert row["mark"] == "asked"
    assert row["after"] == row["mark"] and not row["answered"]


def test_answering_what_is_asked_gives_the_diagnosis_a_user_would_get() -> None:
    row = score_row({**CASE, "answers": ANSWERS, "answers_why": "title: OOM during evaluation"}, "t")
    assert row["mark"] == "asked"
    assert row["answered"] and row["after"] == "right"
    assert "phase=eval" in row["line"]


def test_an_answer_the_thread_gives_to_a_question_never_asked_is_not_used() -> None:
    # a card the reporter named: the tool does not ask it here, so it changes nothing
    row = score_row({**CASE, "answers": {"card_bf16": "no"}, "answers_why": "a V100"}, "t")
    assert not row["answered"] and row["after"] == row["mark"]


def test_answers_must_be_ones_the_questions_allow_and_say_where() -> None:
    assert answer_problems({**CASE, "answers": ANSWERS, "answers_why": "title"}) == []
    problems = answer_problems({**CASE, "answers": {"phase": "during_eval", "colour": "red"}})
    assert len(problems) == 3  # no answers_why, a value no question allows, a question no rule asks
