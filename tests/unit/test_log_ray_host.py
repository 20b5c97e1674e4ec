"""Ray's wordings for a worker or actor that died of the node's RAM are host memory (facts/log_markers.yaml,
oom_forms): excerpts of public threads."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# Unakar/Logic-RL#18 (verl on Ray, "actor died"): the actor's worker SIGKILLed, Ray naming the OOM killer.
ACTOR_DIED = (
    "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
    "        class_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes. "
    "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. "
    "(3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.\n"
)
# AgentR1/Agent-R1#33: the TaskRunner actor died past the pod's memory limit.
POD_LIMIT = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker exits unexpectedly. Worker exits with an exit code None. The worker may have exceeded K8s pod memory "
    "limits.\n"
)
# ray-project/ray#27716: the raylet's memory monitor kills the latest task.
RAYLET_LOW = (
    "(raylet) [2022-08-29 15:18:33,592 E 30307 30344] (raylet) node_manager.cc:2963: System memory low at node "
    "with IP 172.17.0.2. Used memory (23.63GB) / total capacity (33.28GB) (0.709971) exceeds threshold 0.7, "
    "killing latest task with name the_real_oom_actor:Leaker.__init__\n"
)
# ray.exceptions.OutOfMemoryError of the memory monitor (already read before; kept beside the others).
TASK_LOW = "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"


@pytest.mark.parametrize("text", [ACTOR_DIED, POD_LIMIT, RAYLET_LOW, TASK_LOW])
def test_ray_worker_deaths_of_node_ram_are_host_memory(text: str) -> None:
    log = parse_log_text(text)
    assert log.oom and log.ran_out_of == "host", log.error_line
    diagnosis = diagnose(facts_of(log=log))
    assert diagnosis.oom and diagnosis.cause == "host_ram"


def test_an_actor_death_without_memory_words_is_no_oom() -> None:
    text = (
        ACTOR_DIED.split("The actor is dead")[0] + "The actor is dead because it was killed by `ray.kill`.\n"
    )
    assert not parse_log_text(text).oom
