"""Derived facts the real extra cases called for (tests/cases/real_extra.yaml): the phase a failure in the
Trainer's after-step hook belongs to, chosen by the config's schedule; the failing process listed as
"Process N" with more in use than a CUDA context explains; PyTorch's CPU allocator in a phase only the user
named. Facts are built by hand (LogFacts directly), as in test_engine.py."""

from __future__ import annotations

from typing import Any

from test_engine import course, gpu_oom, rule_ids

from oomdoctor.facts.types import LogFacts, OtherProcess
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose


def after_step(step: int) -> LogFacts:
    """A traceback cut in _maybe_log_save_evaluate after ``step`` completed (the reader's answer)."""
    return LogFacts(
        oom=False,
        traceback_cut=True,
        phase="unknown",
        phase_candidates=["eval", "save"],
        step=step,
        good_steps=step,
        training_started=True,
        weights_loaded=True,
    )


def derived(config: Any, log: LogFacts, **answers: str) -> Any:
    return facts_of(config=config, log=log, answers=answers).derived


def test_after_step_failure_is_save_when_only_saving_runs_at_that_step() -> None:
    d = derived(course(eval_strategy=None, eval_steps=None, save_steps=200), after_step(200))
    assert (d.phase, d.phase_source) == ("save", "schedule")


def test_the_schedule_choice_is_explained_in_both_languages() -> None:
    config = course(eval_strategy=None, eval_steps=None, save_steps=200)
    d = diagnose(facts_of(config=config, log=after_step(200)))
    assert d.phase == "save"
    finding = next(f for f in d.findings if f.id == "phase_by_schedule")
    assert "200" in finding.text["en"] and "200" in finding.text["zh"]
    assert "saving a checkpoint" in finding.text["en"] and "保存检查点" in finding.text["zh"]


def test_after_step_failure_is_eval_when_only_evaluation_runs_at_that_step() -> None:
    d = derived(course(eval_steps=100, save_steps=300), after_step(100))
    assert (d.phase, d.phase_source) == ("eval", "schedule")


def test_after_step_failure_stays_unknown_when_both_or_neither_run() -> None:
    both = derived(course(eval_steps=50, save_steps=50), after_step(50))
    assert both.phase == "unknown"
    # the Trainer's default save_steps (500) is not a multiple of 200, and nothing evaluates
    neither = derived(course(eval_strategy=None, eval_steps=None, save_steps=None), after_step(200))
    assert neither.phase == "unknown"
    assert any(q.key == "phase" for q in diagnose(facts_of(config=course(), log=after_step(50))).questions)


def test_after_step_failure_without_a_config_is_asked() -> None:
    d = facts_of(config=None, log=after_step(200)).derived
    assert d.phase == "unknown"


def test_save_strategy_no_rules_out_saving() -> None:
    config = course(eval_steps=100, save_strategy="no")
    assert derived(config, after_step(300)).phase == "eval"


def test_listed_process_that_the_card_cannot_hold_besides_this_one_is_this_one() -> None:
    # LF#7532: "GPU 1 has a total capacity of 79.32 GiB of which 2.40 GiB is free. Process 105400 has
    # 76.92 GiB memory in use. Of the allocated memory 73.28 GiB is allocated by PyTorch, and 1.59 GiB is
    # reserved by PyTorch but unallocated." 76.92 + 74.87 GiB cannot both be on a card with 76.92 GiB in use.
    log = gpu_oom(
        "optimizer_step",
        capacity_mib=81223.68,
        free_mib=2457.6,
        requested_mib=3471.36,
        allocated_mib=75038.72,
        reserved_unallocated_mib=1628.16,
        other_processes=[OtherProcess(pid=105400, used_mib=78766.08)],
    )
    d = derived(course(finetuning_type="full"), log)
    assert d.self_listed_pid == 105400
    assert d.other_process_mib == 0
    assert "other_process.free_the_card" not in rule_ids(diagnose(facts_of(config=course(), log=log)))


def test_a_process_that_fits_beside_this_one_is_still_another_process() -> None:
    log = gpu_oom(
        "first_batch",
        capacity_mib=32491.0,
        free_mib=24.7,
        requested_mib=136.0,
        allocated_mib=14756.0,
        reserved_unallocated_mib=11.0,
        other_processes=[OtherProcess(pid=149826, used_mib=17388.0)],
    )
    d = derived(course(), log)
    assert d.self_listed_pid is None
    assert d.other_process_mib == 17388.0


def test_cpu_allocator_in_a_phase_only_the_user_named_stays_host_ram() -> None:
    # LF#505: the bare DefaultCPUAllocator line; the user says it happened mid-training.
    log = LogFacts(oom=True, oom_kind="cpu_alloc", ran_out_of="host", phase="unknown")
    d = derived(course(), log, phase="long_sample")
    assert d.memory_kind == "host"


def test_cpu_allocator_the_log_placed_in_a_step_is_the_compute_memory() -> None:
    log = LogFacts(oom=True, oom_kind="cpu_alloc", ran_out_of="host", phase="first_batch")
    assert derived(course(), log).memory_kind == "gpu"


def test_zero_stage_the_log_shows_counts_when_the_config_does_not_say() -> None:
    log = gpu_oom("optimizer_step", zero_stage=3, world_size=8, requested_mib=3471.0)
    d = diagnose(facts_of(config=course(finetuning_type="full"), log=log))
    assert facts_of(config=course(finetuning_type="full"), log=log).derived.zero_stage == 3
    assert "optimizer_step.shard_with_zero3" not in rule_ids(d)  # ZeRO-3 is already on
    assert not any(f.id == "multi_gpu_no_deepspeed" for f in d.findings)
    configured = course(finetuning_type="full", deepspeed=None)
    assert facts_of(config=configured, log=gpu_oom("optimizer_step")).derived.zero_stage is None
