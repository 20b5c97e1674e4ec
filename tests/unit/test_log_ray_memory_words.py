"""Ray's memory monitor in its other words (facts/log_markers.yaml, oom_forms "added by fix9a"): its threshold
clause in a copy cut before "Memory on the node" and the exit type of the worker it killed are host RAM, whose
phase is asked when nothing else tells it. A person's sentence about the node reaching a threshold is no line Ray
prints, and is not read as one."""

from __future__ import annotations

import pytest

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# Roblox/FAI-RL#66 (tests/cases/real_round7_other.yaml): every Ray Train worker loads a full copy of a 30B model
REPORTED = """\
  Observed: every rank logs Loading weights: 882/882, each worker process holds ~230 GB RSS, node hits the memory threshold and the worker is killed during RayTrainWorker.__init__.

  2 GPUs: 458.07GB / 482.00GB (95.0%) → OOM   (node = 482 GB)
"""
# Ray's own message, the copy cut before its start (ray-project/ray's memory monitor wording)
CUT_THRESHOLD = (
    "was running was 458.07GB / 482.00GB (0.950323), which exceeds the memory usage threshold of 0.95. Ray killed "
    "this worker (ID: a9b8) because it was the most recently scheduled task\n"
)
EXIT_TYPE = (
    "Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: Task was killed due to the node running low on "
    "memory.\n"
)


@pytest.mark.parametrize("text", [CUT_THRESHOLD, EXIT_TYPE])
def test_the_memory_monitors_other_words_are_host_ram(text: str) -> None:
    log = parse_log_text(text)
    assert log.oom and log.ran_out_of == "host"


def test_a_reporters_sentence_about_the_threshold_is_not_read_as_rays_line() -> None:
    assert not parse_log_text(REPORTED).oom


def test_with_nothing_that_places_it_the_phase_is_asked_not_said() -> None:
    diagnosis = diagnose(facts_of(log=parse_log_text(CUT_THRESHOLD)))
    assert diagnosis.phase == "unknown" and diagnosis.cause == "host_ram"
    assert any(q.key == "phase" for q in diagnosis.questions)


def test_a_gpu_threshold_is_not_host_ram() -> None:
    # vLLM's words for its own share of the card are not Ray's memory monitor
    log = parse_log_text("INFO gpu_memory_utilization=0.9: the memory usage of this engine stays below it\n")
    assert not log.oom
