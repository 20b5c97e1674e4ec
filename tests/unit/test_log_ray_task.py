"""Ray's memory monitor names the task it killed ("name=RewardModelRayActor.__init__"): an actor being built is
loading its model (``ray_task_phases`` in log_markers.yaml)."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.log_tables import tables

# OpenRLHF/OpenRLHF#171 (PPO with Ray, baichuan-13b): the monitor kills the reward model's actor while it is built
KILLED_AT_INIT = (
    "Memory on the node ( ID: 37f3bd9fa11d642c9e13892ee048dfc1f58c4597b77202a59a33835b) where the task (actor ID: "
    "658f7608dec0f9a3428857d502000000, name={task}, pid=5315, memory used=1.67GB) was running was 445.48GB / "
    "468.75GB (0.950365), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: "
    "384252cde217c088bb1cceb44ff7b1fec88a53bd8e7c82273275b694) because it was the most recently scheduled task\n"
)


def test_an_actor_killed_while_it_is_built_is_at_load() -> None:
    f = parse_log_text(KILLED_AT_INIT.format(task="RewardModelRayActor.__init__"))
    assert f.oom and f.ran_out_of == "host"
    assert f.phase == "load" and any("RewardModelRayActor.__init__" in e for e in f.phase_evidence)


def test_a_task_of_the_training_loop_is_not_placed_by_its_name() -> None:
    f = parse_log_text(KILLED_AT_INIT.format(task="PPORayActor.fit"))
    assert f.oom and f.phase == "unknown"


@pytest.mark.parametrize("task", [e for r in tables().raw["ray_task_phases"] for e in r["examples"]])
def test_each_example_task_is_placed(task: str) -> None:
    assert parse_log_text(KILLED_AT_INIT.format(task=task)).phase == "load", task
