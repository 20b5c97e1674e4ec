"""The one assembly step: card size, world size, effective batch and sharding settled once, from what says
them, and read the same way by the derived facts, the findings and the config the estimate sees.

The excerpts are real (LLaMA-Factory issues, cited); they go through the real log reader.
"""

from __future__ import annotations

import pytest

from oomdoctor import records
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.gpu import FakeGpuSource, read_gpu
from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.types import GpuDevice
from oomdoctor.rules.assemble import assemble, facts_of
from oomdoctor.rules.engine import diagnose
from oomdoctor.rules.facts import Readings

COURSE = {
    "model_name_or_path": "Qwen/Qwen3-0.6B",
    "stage": "sft",
    "do_train": True,
    "finetuning_type": "lora",
    "dataset": "keywords_train",
    "cutoff_len": 2048,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 8,
    "fp16": True,
    "output_dir": "saves/x",
}

# LLaMA-Factory#4216 (SFT of Yi-34B): a [rank3] traceback and no launcher banner in the excerpt.
RANK3_EXCERPT = """\
{'loss': 0.717, 'grad_norm': 0.7494966983795166, 'learning_rate': 0.0002503039932980217, 'epoch': 1.38}
 28%|█████████████████▊                  | 200/720 [1:38:25<4:14:20, 29.35s/it][rank3]: Traceback (most recent call last):
[rank3]:   File "/data/cxl/llama-factory-cxl/src/llmtuner/train/sft/workflow.py", line 71, in run_sft
[rank3]:     train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
[rank3]:   File "/root/miniconda3/envs/lf_cxl/lib/python3.10/site-packages/transformers/trainer.py", line 1885, in train
[rank3]:     return inner_training_loop(
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 3 has a total capacity of 79.15 GiB of which 208.06 MiB is free. Process 2271800 has 78.94 GiB memory in use. Of the allocated memory 77.87 GiB is allocated by PyTorch, and 6.23 MiB is reserved by PyTorch but unallocated.
"""
# LLaMA-Factory's own banner line, as every rank prints it while parsing its arguments.
WORLD_BANNER = "[INFO|parser.py:355] Process rank: 3, world size: 8, device: cuda:3, n_gpu: 1\n"


def course(**changes: object) -> object:
    return config_from_mapping({**COURSE, **changes})


def test_a_rank_number_is_a_lower_bound_never_the_world_size() -> None:
    log = parse_log_text(RANK3_EXCERPT)
    assert log.rank == 3 and log.world_size is None
    facts = facts_of(config=course(), log=log)
    d = facts.derived
    # Before assembly the config said 32 (world 1) and the derived facts 128 (world = rank + 1).
    assert (d.world_size, d.world_size_source, d.processes_at_least) == (None, None, 4)
    assert d.effective_batch is None  # how many processes is unsaid: so is the batch per update
    assert facts.config.world_size == 1 and d.micro_batch == 4 and d.accumulation == 8
    ids = [f.id for f in diagnose(facts).findings]
    assert "effective_batch" not in ids and "multi_gpu_no_deepspeed" in ids  # several GPUs, at least 4
    several = next(f for f in diagnose(facts).findings if f.id == "multi_gpu_no_deepspeed")
    assert "At least 4 GPUs" in several.text["en"] and "至少 4 张卡" in several.text["zh"]  # never "4 GPUs"
    per_process = next(f for f in diagnose(facts).findings if f.id == "effective_batch_unknown_world")
    assert "32" in per_process.text["en"] and "4" in per_process.text["en"] and "32" in per_process.text["zh"]


def test_the_banners_world_size_is_the_one_everybody_reads() -> None:
    log = parse_log_text(WORLD_BANNER + RANK3_EXCERPT)
    assert log.world_size == 8
    facts = facts_of(config=course(), log=log)
    d = facts.derived
    assert (d.world_size, d.world_size_source, d.processes_at_least) == (8, "log", 8)
    assert d.effective_batch == facts.config.effective_batch == 4 * 8 * 8
    effective = next(f for f in diagnose(facts).findings if f.id == "effective_batch")
    assert "256" in effective.text["en"] and "8" in effective.text["zh"]
    stated = next(f for f in diagnose(facts).findings if f.id == "multi_gpu_no_deepspeed")
    assert stated.text["en"].startswith("8 GPUs without DeepSpeed")  # the banner's count, not rank 3 + 1


def test_world_size_sources_in_order() -> None:
    banner_total = records.replace(
        parse_log_text(RANK3_EXCERPT), instantaneous_batch_size=4, gradient_accumulation_steps=8,
        total_train_batch_size=192,
    )  # fmt: skip
    d = facts_of(config=course(), log=banner_total).derived
    assert (d.world_size, d.world_size_source) == (6, "banner")  # 192 = 4 x 8 x 6
    d = assemble(Readings(config=course(), log=banner_total, world_size=2)).derived
    assert (d.world_size, d.world_size_source) == (2, "given")
    d = facts_of(config=course(), env={"WORLD_SIZE": "16"}).derived
    assert (d.world_size, d.world_size_source, d.effective_batch) == (16, "env", 4 * 8 * 16)
    d = facts_of(config=course()).derived
    assert (d.world_size, d.world_size_source, d.processes_at_least, d.effective_batch) == (
        1,
        "single",
        1,
        32,
    )


def test_ray_and_fsdp_runs_are_sharded_and_not_told_to_use_deepspeed() -> None:
    log = parse_log_text(RANK3_EXCERPT)
    ray = facts_of(config=course(ray_num_workers=4), log=log)
    assert (ray.derived.world_size, ray.derived.world_size_source, ray.derived.sharded_by) == (
        4,
        "ray",
        "ray",
    )
    fsdp = facts_of(config=course(fsdp="full_shard auto_wrap"), log=log)
    assert fsdp.derived.sharded_by == "fsdp"
    plain = facts_of(config=course(), log=log)
    assert plain.derived.sharded_by == "none"
    switched_on = facts_of(config=course(), log=log, env={"USE_RAY": "1"})  # how many workers: unsaid
    assert (switched_on.derived.sharded_by, switched_on.derived.world_size) == ("ray", None)
    for facts in (ray, fsdp):
        assert "multi_gpu_no_deepspeed" not in [f.id for f in diagnose(facts).findings]


@pytest.mark.parametrize(
    ("flag", "with_log", "expected"),
    [
        (24576.0, True, (24576.0, "flag")),
        (None, True, (pytest.approx(79.15 * 1024), "log")),
        (None, False, (32768.0, "nvml")),
    ],
)
def test_one_card_size_flag_then_log_then_nvml(flag: float | None, with_log: bool, expected: tuple) -> None:
    gpu = read_gpu(FakeGpuSource([GpuDevice(index=0, name="Tesla V100-SXM2-32GB", total_mib=32768.0)]))
    log = parse_log_text(RANK3_EXCERPT) if with_log else None
    facts = assemble(Readings(config=course(), log=log, gpu=gpu, capacity_mib=flag))
    assert (facts.derived.capacity_mib, facts.derived.capacity_source) == expected
    diagnosis = diagnose(facts)
    assert diagnosis.capacity_mib == facts.derived.capacity_mib == facts.capacity_mib


def test_the_bundle_is_frozen_and_answers_make_a_new_one() -> None:
    facts = facts_of(config=course())
    with pytest.raises(records.FrozenRecordError):
        facts.config = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        facts.answers["phase"] = "eval"  # type: ignore[index]
    answered = facts.with_answers({"phase": "eval"})
    assert answered is not facts and answered.derived.phase == "eval" and facts.derived.phase == "unknown"
    assert dict(answered.answers) == {"phase": "eval"} and answered.readings is not None


def test_the_launch_command_in_the_error_states_the_world_size() -> None:
    """LLaMA-Factory#7781: [rank5] on GPU 5 would say six processes; the torchrun command says eight."""
    from test_launcher import LF_7781

    excerpt = (
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB. GPU 5 has a total "
        "capacity of 23.65 GiB of which 208.06 MiB is free. Process 2271800 has 23.44 GiB memory in use. Of the "
        "allocated memory 22.87 GiB is allocated by PyTorch, and 6.23 MiB is reserved by PyTorch but "
        "unallocated.\n" + LF_7781 + "\n"
    )
    log = parse_log_text(excerpt)
    assert (log.rank, log.gpu_index, log.launcher_world_size) == (5, 5, 8)
    d = facts_of(config=course(), log=log).derived
    assert (d.world_size, d.world_size_source, d.processes_at_least, d.effective_batch) == (
        8,
        "launcher",
        8,
        256,
    )


def test_the_cli_flag_is_the_card_for_the_whole_diagnosis(tmp_path, capsys) -> None:
    """--gpu-mib wins over the log's capacity in the JSON contract, the estimate and the findings alike."""
    import json

    import yaml

    from oomdoctor.cli import main

    config, log = tmp_path / "train.yaml", tmp_path / "train.log"
    config.write_text(yaml.safe_dump(COURSE), encoding="utf-8")
    log.write_text(RANK3_EXCERPT, encoding="utf-8")
    assert main(["diagnose", "--config", str(config), "--log", str(log), "--gpu-mib", "24576", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["capacity_mib"] == 24576 and out["facts"]["capacity_mib"] == 24576
    assert out["facts"]["derived"]["capacity_source"] == "flag"
    assert out["facts"]["estimate"]["gpu_total_mib"] == 24576


def test_a_bf16_run_that_completed_steps_says_the_card_computes_bf16() -> None:
    """No NVML, no card name: the log of a bf16 run with good steps answers the bf16 question itself."""
    from oomdoctor.facts.types import LogFacts
    from oomdoctor.rules.assemble import facts_of

    config = config_from_mapping(
        {
            "model_name_or_path": "Qwen/Qwen3-0.6B",
            "stage": "sft",
            "do_train": True,
            "finetuning_type": "lora",
            "bf16": True,
            "dataset": "d",
            "output_dir": "o",
        }  # fmt: skip
    )
    ran = LogFacts(oom=True, oom_kind="cuda_oom", phase="long_sample", good_steps=29, step=30)
    cut = LogFacts(oom=True, oom_kind="cuda_oom", phase="first_batch", good_steps=0, step=1)
    assert facts_of(config=config, log=ran).derived.card_bf16 is True
    assert facts_of(config=config, log=cut).derived.card_bf16 is None
