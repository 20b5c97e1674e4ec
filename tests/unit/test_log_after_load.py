"""Markers that say loading FINISHED (a full "Loading checkpoint shards" bar, "All model checkpoint weights were
used", the LoRA set-up, LLaMA-Factory's parameter count) close the load phase: a failure after them, with nothing
later that places it, is not at loading (asked), and the weights count as loaded."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.rules.assemble import facts_of
from oomdoctor.rules.engine import diagnose

# hiyouga/LlamaFactory#3444 (tests/cases/real_round7_lf.yaml): Qwen1.5-7B LoRA on two 4090s, the log ends after the
# LoRA set-up (the cards ran out while fine-tuning, the reporter says)
AFTER_SETUP = """\
Loading checkpoint shards: 100%|██████████████████████████████████████████████████| 4/4 [00:04<00:00,  1.21s/it]
[INFO|modeling_utils.py:4170] 2024-04-25 17:28:07,435 >> All model checkpoint weights were used when initializing Qwen2ForCausalLM.

[INFO|modeling_utils.py:4178] 2024-04-25 17:28:07,435 >> All the weights of Qwen2ForCausalLM were initialized from the model checkpoint at E:\\llm\\Qwen1.5-7B-Chat
.
04/25/2024 17:28:07 - INFO - llmtuner.model.utils.checkpointing - Gradient checkpointing enabled.
04/25/2024 17:28:07 - INFO - llmtuner.model.utils.attention - Using torch SDPA for faster training and inference.
04/25/2024 17:28:07 - INFO - llmtuner.model.adapter - Fine-tuning method: LoRA
"""
LOADING = "Loading checkpoint shards:  75%|███████▌  | 6/8 [00:41<00:13,  6.80s/it]\n"
OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 136.00 MiB.\n"


def test_a_log_that_stops_after_the_load_finished_says_so() -> None:
    f = parse_log_text(AFTER_SETUP)
    assert not f.oom and f.stopped_in == "after_load" and f.weights_loaded is True


def test_an_oom_after_the_load_finished_is_not_at_loading() -> None:
    f = parse_log_text(AFTER_SETUP + OOM)
    assert f.oom and f.phase == "unknown" and f.weights_loaded is True
    assert any("finished loading" in e for e in f.phase_evidence)


def test_an_oom_while_shards_load_is_at_loading() -> None:
    f = parse_log_text(LOADING + OOM)
    assert f.phase == "load" and f.weights_loaded is False


def test_llamafactorys_parameter_count_closes_the_load() -> None:
    count = "[INFO|2026-11-12 14:03:17] llamafactory.model.loader:144 >> trainable params: 5,046,272 || all params: 601,096,192 || trainable%: 0.8395\n"
    f = parse_log_text(LOADING + count + OOM)
    assert f.phase == "unknown" and f.weights_loaded is True and f.trainable_params == 5046272


def test_the_gpu_answer_to_a_log_stopped_after_loading_does_not_say_load() -> None:
    # the user says the GPU ran out: the loaded weights were on the card, so it failed later (asked, not "load")
    gpu = diagnose(facts_of(log=parse_log_text(AFTER_SETUP), answers={"memory_kind": "gpu"}))
    assert gpu.phase != "load"
    # host RAM killed right after loading is still the load's (the copies of the weights in host RAM)
    host = diagnose(facts_of(log=parse_log_text(AFTER_SETUP), answers={"memory_kind": "host"}))
    assert host.phase == "load"
