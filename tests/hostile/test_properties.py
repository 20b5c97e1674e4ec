"""Property tests of the readers a hostile folder reaches: whatever the bytes, the config, lengths and
trial-folder readers return their facts or raise ``BadInput`` (one line); nothing else escapes, and what they
return is typed and in range. ``OOMDOCTOR_HYPOTHESIS=hostile10k`` runs 10,000 examples per reader."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from oomdoctor.errors import BadInput
from oomdoctor.facts.config import config_from_mapping, load_yaml_mapping
from oomdoctor.facts.dataset import read_lengths_file
from oomdoctor.facts.types import ConfigFacts, DataFacts
from oomdoctor.trial.compare import compare_trials

CONFIG_KEYS = ["per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
               "cutoff_len", "lora_rank", "lora_alpha", "val_size", "num_train_epochs", "max_steps", "fp16", "bf16",
               "eval_strategy", "eval_steps", "save_steps", "logging_steps", "deepspeed", "dataset", "eval_dataset",
               "packing", "quantization_bit", "stage", "model_name_or_path", "output_dir", "max_samples",
               "disable_gradient_checkpointing", "report_to", "top.model_name", "x"]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.integers(min_value=0, max_value=8).map(
        lambda n: 10 ** (n * 500)
    ),  # up to 4,000 digits (the battery has 5,000)
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["true", "false", "1e309", "nan", "-0", "4", " 8 ", "0x10", "1_000", '{"a": [[[', "{}"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
YAML_TEXT = st.text(
    alphabet=st.sampled_from(list("ab:12 -[]{},&*!|>#'\"\n\t.eE+_") + ["\x00", "\u00e9", "\ufeff"]),
    max_size=200,
)


def _one_line(err: BadInput) -> None:
    assert "\n" not in str(err) and str(err).strip()


def _check_config(facts: ConfigFacts) -> None:
    for value in (facts.per_device_train_batch_size, facts.per_device_eval_batch_size, facts.gradient_accumulation_steps,
                  facts.cutoff_len, facts.lora_rank):  # fmt: skip
        assert isinstance(value, int) and 1 <= value <= 1 << 24
    assert math.isfinite(facts.val_size) and math.isfinite(facts.num_train_epochs)


@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), VALUES, max_size=10))
def test_config_values_are_facts_or_bad_input(raw: dict[str, Any]) -> None:
    try:
        facts = config_from_mapping(raw, path="hostile.yaml")
    except BadInput as err:
        _one_line(err)
        return
    _check_config(facts)


@given(st.one_of(YAML_TEXT, st.binary(max_size=200),
                 st.dictionaries(st.sampled_from(CONFIG_KEYS), VALUES, max_size=10).map(
                     lambda d: yaml.safe_dump(d, allow_unicode=True))))  # fmt: skip
def test_config_files_are_facts_or_bad_input(content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.yaml"
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        try:
            facts = config_from_mapping(load_yaml_mapping(path), path=str(path))
        except BadInput as err:
            _one_line(err)
            return
        _check_config(facts)


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)  # fmt: skip
LENGTH_KEYS = ["source", "samples", "max_tokens", "p50_tokens", "p95_tokens", "p99_tokens", "eval_samples",
               "eval_max_tokens", "cutoff_len", "truncated"]  # fmt: skip
JSON_TEXT = st.one_of(
    st.dictionaries(st.sampled_from(LENGTH_KEYS), JSON_VALUES, max_size=10).map(json.dumps),
    st.text(alphabet=st.sampled_from(list('{}[]:,"0123456789.eE-+ ntrufalsNaIiy') + ["\x00"]), max_size=120),
    st.integers(min_value=1, max_value=200).map(lambda n: "[" * n * 50 + "]" * n * 50),
    st.binary(max_size=100).map(lambda b: b.decode("latin-1")),
)


@given(JSON_TEXT)
def test_lengths_files_are_facts_or_bad_input(content: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lengths.json"
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
        try:
            data = read_lengths_file(path)
        except BadInput as err:
            _one_line(err)
            return
        assert isinstance(data, DataFacts) and isinstance(data.max_tokens, int) and data.max_tokens >= 1
        for key in LENGTH_KEYS[1:]:
            value = getattr(data, key)
            assert value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


RESULT_KEYS = ["outcome", "peak_memory_mib", "peak_source", "wall_s", "steps_done", "total_steps", "steps_requested",
               "eval_loss", "exit_code", "phase", "alloc_retries", "warnings", "checkpoints", "dataset_fingerprint",
               "model_name_or_path", "precision", "gpu_name"]  # fmt: skip
CSV_LINES = st.lists(st.one_of(
    st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["host", "0", "1", ""]),
              st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))).map(
        lambda t: f"{t[0]},{t[1]},{t[2]},,,"),
    st.text(max_size=30)), max_size=8).map(
    lambda rows: "time_s,gpu,memory_used_mib,memory_total_mib,util_pct,power_w\n" + "\n".join(rows))  # fmt: skip


@given(st.dictionaries(st.sampled_from(RESULT_KEYS), JSON_VALUES, max_size=12), st.one_of(st.none(), JSON_TEXT),
       CSV_LINES, st.one_of(st.none(), YAML_TEXT))  # fmt: skip
def test_trial_folders_compare_or_are_bad_input(
    result: dict, change: str | None, samples: str, config: str | None
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trial = Path(folder) / "trial"
        trial.mkdir()
        (trial / "result.json").write_text(json.dumps(result))
        (trial / "gpu-samples.csv").write_text(samples, encoding="utf-8", errors="surrogatepass")
        if change is not None:
            (trial / "change.json").write_text(change, encoding="utf-8", errors="surrogatepass")
        if config is not None:
            (trial / "config.yaml").write_text(config, encoding="utf-8", errors="surrogatepass")
        try:
            comparison = compare_trials([trial, trial])
        except BadInput as err:
            _one_line(err)
            return
        assert comparison.render("en") and comparison.render("zh")
        json.dumps(comparison.to_json(), allow_nan=False)  # what --json prints is valid JSON
        row = comparison.rows[0]
        assert row.peak_mib is None or (math.isfinite(row.peak_mib) and row.peak_mib >= 0)
