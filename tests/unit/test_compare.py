"""Comparing trials (the course's table and its warnings) and reviewing two configs (the course's quiz)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from oomdoctor.errors import BadInput
from oomdoctor.report.table import width
from oomdoctor.trial import compare as compare_module
from oomdoctor.trial.compare import compare_configs, compare_trials, field_effects, review_mappings

COURSE_CONFIG = {
    "model_name_or_path": "Qwen/Qwen3-0.6B",
    "stage": "sft",
    "finetuning_type": "lora",
    "lora_rank": 8,
    "dataset": "keywords_clean_train",
    "template": "qwen3_nothink",
    "cutoff_len": 2048,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 8,
    "learning_rate": 5.0e-5,
    "fp16": True,
    "max_steps": 50,
}

FACTS = {
    "dataset_fingerprint": "sha256:aaaa",
    "model_name_or_path": "Qwen/Qwen3-0.6B",
    "precision": "fp16",
    "gpu_name": "Tesla V100-SXM2-32GB",
    "peak_source": "nvml",
    "steps_requested": 50,
}


def make_trial(
    folder: Path, config: dict, *, change: dict | None = None, samples: str | None = None, **result
) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump({**config, "output_dir": str(folder / "output")}))
    record = {"outcome": "ok", "exit_code": 0, "steps_done": 50, "total_steps": 50, "checkpoints": ["checkpoint-50"],
              **FACTS, **result}  # fmt: skip
    (folder / "result.json").write_text(json.dumps(record))
    if change is not None:
        (folder / "change.json").write_text(json.dumps(change))
    if samples is not None:
        (folder / "gpu-samples.csv").write_text(samples)
    return folder


@pytest.fixture
def course_trials(tmp_path: Path) -> list[Path]:
    b4 = make_trial(tmp_path / "batch4", COURSE_CONFIG, peak_memory_mib=28588.0, wall_s=300.54, eval_loss=2.1712,
                    alloc_retries=1, warnings=["CUDA out of memory. Tried to allocate 2.17 GiB"])  # fmt: skip
    change = {"rule": "first_batch.halve_micro_batch", "title": {"en": "Halve the micro-batch", "zh": "batch 减半"},
              "changes": {"per_device_train_batch_size": [4, 2], "gradient_accumulation_steps": [8, 16]}}  # fmt: skip
    b2 = make_trial(
        tmp_path / "batch2",
        {**COURSE_CONFIG, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 16},
        change=change,
        peak_memory_mib=22230.0,
        wall_s=560.27,
        eval_loss=2.1708,
    )
    return [b4, b2]


def test_course_comparison_numbers(course_trials: list[Path]) -> None:
    comparison = compare_trials(course_trials)
    first, second = comparison.rows
    assert first.peak_gib == pytest.approx(27.92, abs=0.005)
    assert second.peak_gib == pytest.approx(21.71, abs=0.005)
    assert second.delta_peak_mib == -6358.0 and second.delta_wall_s == pytest.approx(259.73)
    assert comparison.comparable and comparison.warnings == []

    en = comparison.render("en")
    assert "-6,358 MiB (-6.21 GiB), +259.73 s" in en
    assert "28,588" in en and "27.92" in en and "300.54" in en and "22,230" in en and "21.71" in en
    assert "allocation warnings (1), then finished normally, saved checkpoint-50" in en
    assert "50/50" in en and "2.171" in en
    assert "per_device_train_batch_size 4 -> 2" in en and "first_batch.halve_micro_batch" in en

    zh = comparison.render("zh")
    assert "-6,358 MiB(约 -6.21 GiB),+259.73 秒" in zh
    assert "正常结束,保存 checkpoint-50" in zh and "出现过显存分配告警" in zh and "batch 减半" in zh

    data = comparison.to_json()
    assert data["comparable"] is True
    assert data["trials"][1]["difference"]["en"] == "-6,358 MiB (-6.21 GiB), +259.73 s"
    assert data["trials"][0]["peak_gib"] == 27.92
    assert data["trials"][1]["change"]["rule"] == "first_batch.halve_micro_batch"
    json.dumps(data)  # serialisable as is


def test_table_columns_line_up_in_chinese(course_trials: list[Path]) -> None:
    lines = compare_trials(course_trials).render("zh").splitlines()
    header, rule = lines[1], lines[2]
    assert width(header) <= width(rule) + 2
    positions = {width(line[: line.index("300.54")]) for line in lines if "300.54" in line}
    header_pos = width(header[: header.index("整次耗时")])
    assert positions == {header_pos}


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("dataset_fingerprint", "sha256:bbbb", "other data"),
        ("model_name_or_path", "Qwen/Qwen3-8B", "another model"),
        ("gpu_name", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("peak_source", "host_rss", "host RSS"),
        ("steps_requested", 20, "wall times are not comparable"),
        ("precision", "bf16", "precision is the change under test"),
    ],
)
def test_trials_that_cannot_be_compared_are_flagged(
    tmp_path: Path, key: str, value: object, needle: str
) -> None:
    a = make_trial(tmp_path / "a", COURSE_CONFIG, peak_memory_mib=1000.0, wall_s=10.0)
    b = make_trial(tmp_path / "b", COURSE_CONFIG, peak_memory_mib=900.0, wall_s=12.0, **{key: value})
    comparison = compare_trials([a, b])
    assert not comparison.comparable
    assert any(needle in w.text.en for w in comparison.warnings)
    assert needle.split()[0] in comparison.render("en")


def test_precision_is_fine_when_it_is_the_change_under_test(tmp_path: Path) -> None:
    a = make_trial(tmp_path / "a", {**COURSE_CONFIG, "fp16": False}, peak_memory_mib=1000.0, wall_s=10.0,
                   precision="fp32")  # fmt: skip
    b = make_trial(tmp_path / "b", COURSE_CONFIG, peak_memory_mib=800.0, wall_s=9.0)
    comparison = compare_trials([a, b])
    assert comparison.comparable and comparison.warnings == []


def test_unknown_data_and_many_changes_are_warned(tmp_path: Path) -> None:
    a = make_trial(tmp_path / "a", COURSE_CONFIG, peak_memory_mib=1000.0, wall_s=10.0,
                   dataset_fingerprint="unknown")  # fmt: skip
    b = make_trial(tmp_path / "b", {**COURSE_CONFIG, "per_device_train_batch_size": 2, "learning_rate": 1e-4},
                   peak_memory_mib=800.0, wall_s=9.0, dataset_fingerprint="unknown")  # fmt: skip
    comparison = compare_trials([a, b])
    assert [w.kind for w in comparison.warnings] == ["many_changes", "unknown_data"]
    # --json keeps each warning as one object, its kind beside the two texts
    shown = json.loads(json.dumps(comparison.to_json(), ensure_ascii=False))["warnings"]
    assert [list(w) for w in shown] == [["kind", "en", "zh"]] * 2
    assert shown[1] == {"kind": "unknown_data", **comparison.warnings[1].text}
    assert "b" in shown[1]["en"] and shown[1]["zh"] != shown[1]["en"]


def test_failed_trials_and_peak_from_samples(tmp_path: Path) -> None:
    samples = "time_s,gpu,memory_used_mib,memory_total_mib,util_pct,power_w\n0.0,0,500,32768,,\n0.2,0,32000.5,32768,99,300\n"
    a = make_trial(tmp_path / "a", COURSE_CONFIG, outcome="oom", exit_code=1, phase="first_batch", wall_s=40.0,
                   steps_done=0, checkpoints=[], samples=samples)  # fmt: skip
    b = make_trial(tmp_path / "b", COURSE_CONFIG, outcome="timed_out", exit_code=-15, wall_s=600.0,
                   peak_memory_mib=1.0, checkpoints=[])  # fmt: skip
    comparison = compare_trials([a, b])
    assert comparison.rows[0].peak_mib == 32000.5  # no peak in result.json: read the samples
    en = comparison.render("en")
    assert "out of memory at the first batch" in en and "stopped at the time limit" in en
    assert "在第一批时内存不足" in comparison.render("zh")


def test_not_a_trial_folder_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="not a trial folder"):
        compare_trials([tmp_path / "empty"])
    with pytest.raises(BadInput, match="not a trial folder"):
        compare_trials([tmp_path / "missing"])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "result.json").write_text("{not json")
    with pytest.raises(BadInput, match="result.json is not valid JSON"):
        compare_trials([broken])


# --- Config review -----------------------------------------------------------------------------------------


def test_course_quiz_only_the_batch_targets_memory(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    new = tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(COURSE_CONFIG))
    quiz = {**COURSE_CONFIG, "per_device_train_batch_size": 2, "learning_rate": 1e-4, "lora_rank": 16,
            "cutoff_len": 512}  # fmt: skip
    new.write_text(yaml.safe_dump(quiz))
    review = compare_configs(old, new)
    effects = {c.field: (c.direction, c.memory) for c in review.changes}
    assert effects == {
        "per_device_train_batch_size": ("down", "less"),
        "learning_rate": ("up", "none"),
        "lora_rank": ("up", "more"),
        "cutoff_len": ("down", "depends"),
    }
    risks = {c.field: c.risks for c in review.changes}
    assert "samples_cut" in risks["cutoff_len"] and "different_training" in risks["learning_rate"]
    assert "different_training" in risks["lora_rank"] and risks["per_device_train_batch_size"] == ["slower"]
    assert sorted(review.things_changed) == sorted(effects)
    assert review.targets_memory == ["per_device_train_batch_size"]
    texts = [w["en"] for w in review.warnings]
    assert texts[0].startswith("4 things changed at once")
    assert "Only per_device_train_batch_size targets the memory." in texts
    assert "lora_rank adds memory." in texts
    assert any(t.startswith("cutoff_len cuts long samples") for t in texts)
    assert "learning_rate changes the training, not the memory." in texts
    zh = review.render("zh")
    assert "一次改了 4 项" in zh and "减少" in zh and "截断" in zh
    data = review.to_json()
    assert data["targets_memory"] == ["per_device_train_batch_size"]
    json.dumps(data)


def test_batch_with_accumulation_is_one_change() -> None:
    review = review_mappings(COURSE_CONFIG, {**COURSE_CONFIG, "per_device_train_batch_size": 2,
                                             "gradient_accumulation_steps": 16})  # fmt: skip
    assert review.things_changed == ["per_device_train_batch_size"]
    assert review.warnings == []
    accumulation = next(c for c in review.changes if c.field == "gradient_accumulation_steps")
    assert accumulation.paired_with == "per_device_train_batch_size"
    assert "effective batch stays 32" in accumulation.note["en"]
    # accumulation alone changes the effective batch: that is a different training
    alone = review_mappings(COURSE_CONFIG, {**COURSE_CONFIG, "gradient_accumulation_steps": 4})
    assert alone.changes[0].risks == ["different_training"] and alone.changes[0].paired_with is None


def test_defaults_and_webui_strings_are_understood() -> None:
    # the batch defaults to 8 in LLaMA-Factory: leaving it out and writing 2 is "down"
    review = review_mappings({"stage": "sft"}, {"stage": "sft", "per_device_train_batch_size": 2})
    assert [(c.field, c.old, c.new, c.memory) for c in review.changes] == [
        ("per_device_train_batch_size", 8, 2, "less")
    ]
    # WebUI files write "4" and "true": same meaning, no change
    assert review_mappings({"per_device_train_batch_size": 4, "fp16": True},
                           {"per_device_train_batch_size": "4", "fp16": "true"}).changes == []  # fmt: skip
    # switching gradient checkpointing off adds memory
    off = review_mappings({}, {"disable_gradient_checkpointing": True})
    assert (off.changes[0].direction, off.changes[0].memory) == ("on", "more")
    # an unknown field is listed with an unknown effect
    odd = review_mappings({}, {"my_custom_key": 3})
    assert odd.changes[0].memory == "unknown"


def test_bookkeeping_fields_are_listed_but_not_counted() -> None:
    review = review_mappings(COURSE_CONFIG, {**COURSE_CONFIG, "output_dir": "elsewhere", "save_steps": 10,
                                             "per_device_eval_batch_size": 2})  # fmt: skip
    assert {c.field for c in review.changes} == {"output_dir", "save_steps", "per_device_eval_batch_size"}
    assert review.things_changed == ["per_device_eval_batch_size"]
    assert review.targets_memory == ["per_device_eval_batch_size"]
    assert review.warnings == []


def test_field_effects_data_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = field_effects()
    assert data["fields"]["per_device_train_batch_size"]["down"]["memory"] == "less"
    broken = tmp_path / "field_effects.yaml"
    # an unquoted ASCII comma inside a flow mapping splits a text: the loader must refuse it
    broken.write_text("risks: {}\nfields:\n  x:\n    label: {en: a, zh: 甲,乙}\n    up: {memory: less, risks: []}\n",
                      encoding="utf-8")  # fmt: skip
    monkeypatch.setattr(compare_module, "_EFFECTS_FILE", broken)
    field_effects.cache_clear()
    try:
        with pytest.raises(ValueError, match="x.label"):
            field_effects()
        broken.write_text(
            "risks: {}\nfields:\n  x:\n    label: {en: a, zh: b}\n    up: {memory: lots, risks: []}\n"
        )
        field_effects.cache_clear()
        with pytest.raises(ValueError, match="memory must be one of"):
            field_effects()
    finally:
        monkeypatch.undo()
        field_effects.cache_clear()


def test_trials_named_alike_are_told_apart(tmp_path) -> None:
    from pathlib import Path

    from oomdoctor.trial.compare import distinct_names

    patch_folder = tmp_path / "01-halve"
    (patch_folder / "run").mkdir(parents=True)
    (patch_folder / "change.json").write_text("{}")
    assert distinct_names([tmp_path / "00-baseline", patch_folder / "run"]) == ["00-baseline", "01-halve/run"]

    folders = [Path("/t/trials/00-baseline"), Path("/t/trials/01-halve/run"), Path("/t/trials/02-eval/run")]
    assert distinct_names(folders) == ["00-baseline", "01-halve/run", "02-eval/run"]
    assert distinct_names([Path("/a/x"), Path("/b/y")]) == ["x", "y"]
    assert distinct_names([Path("/a/run"), Path("/a/run")]) == ["/a/run", "/a/run"]  # the same folder twice


def test_a_failed_trial_lower_peak_is_not_called_a_saving() -> None:
    from oomdoctor.trial.compare import TrialRow, _delta_text

    def row(outcome: str) -> TrialRow:
        r = TrialRow(name=outcome, folder=outcome, outcome=outcome, peak_mib=900.0, peak_source="nvml",
                     wall_s=3.0, steps_done=2, total_steps=8, eval_loss=None)  # fmt: skip
        r.delta_peak_mib, r.delta_wall_s = -1200.0, -10.0
        return r

    failed, passed = row("oom"), row("ok")
    assert "not a saving" in _delta_text(failed, "en") and "不算节省" in _delta_text(failed, "zh")
    assert "not a saving" not in _delta_text(passed, "en")


def test_the_table_writes_long_walls_and_unknowns_with_the_shared_formatters() -> None:
    from oomdoctor.trial.compare import Comparison, TrialRow

    first = TrialRow(name="long", folder="long", outcome="ok", peak_mib=None, peak_source=None, wall_s=1300.54,
                     steps_done=None, total_steps=None, eval_loss=None)  # fmt: skip
    second = TrialRow(name="short", folder="short", outcome="ok", peak_mib=2048.0, peak_source="nvml",
                      wall_s=560.27, steps_done=8, total_steps=8, eval_loss=2.17)  # fmt: skip
    second.delta_wall_s = -740.27
    lines = Comparison(rows=[first, second]).render("en").splitlines()
    long_row = next(line for line in lines if line.startswith("long "))
    short_row = next(line for line in lines if line.startswith("short "))
    assert long_row.split()[1:4] == ["-", "-", "1,300.54"]  # a separator in the wall; unknown peaks a dash
    assert short_row.split()[1:4] == ["2,048", "2.00", "560.27"]
    assert short_row.endswith("-740.27 s")
