"""verl's worker set-up lines (the vLLM rollout engine's KV cache, the sharding manager) mark the load phase: a
worker that dies then died before any training step."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

# verl-project/verl#217 (PPO example on one H100): the worker is killed by the host's OOM killer while it builds
# the rollout engine
RAYLET_KILL = (
    "(WorkerDict pid=3566775) before init cache memory allocated: 5.96926464GB, reserved: 6.079643648GB\n"
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
    "the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff9697576811089192d478044801000000 "
    "Worker ID: fa30bc39b193709af627f4217b9fda48f637379f135aadd5c4e8d12e Worker exit type: SYSTEM_ERROR Worker exit "
    "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root "
    "causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is "
    "called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.\n"
)


def test_a_worker_killed_while_verl_builds_its_rollout_is_at_load() -> None:
    f = parse_log_text(RAYLET_KILL)
    assert f.oom and f.ran_out_of == "host"
    assert f.phase == "load" and any("verl was building its workers" in e for e in f.phase_evidence)


def test_after_the_training_progress_starts_it_is_no_longer_load() -> None:
    bar = "(TaskRunner pid=700829) Training Progress:   3%|▎         | 12/400 [10:00<5:23:00, 50.00s/it]\n"
    lines = RAYLET_KILL.splitlines(keepends=True)
    f = parse_log_text(lines[0] + bar + lines[1])
    assert f.phase != "load" and f.good_steps == 12 and f.training_started
