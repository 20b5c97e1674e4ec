"""Real token lengths through LLaMA-Factory's loader and template, checked against a direct count.

The direct count formats each alpaca sample the way the ``qwen3_nothink`` template does
(``<|im_start|>user\\n{instruction}\\n{input}<|im_end|>\\n<|im_start|>assistant\\n{output}<|im_end|>\\n``)
and tokenizes it with the tiny model's tokenizer; ``token_lengths`` must agree sample for sample.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from oomdoctor.errors import BadInput
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.dataset import percentile, summarise

# --------------------------------------------------------------------------------------- pure helpers


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.95) == 95
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7], 0.5) == 7
    assert percentile([], 0.5) is None


def test_summarise_counts_what_the_cutoff_cuts() -> None:
    facts = summarise([10, 500, 957, 300], [604, 20], 512, source="tokenized")
    assert (facts.samples, facts.max_tokens, facts.truncated) == (4, 957, 1)
    assert (facts.eval_samples, facts.eval_max_tokens) == (2, 604)
    assert summarise([10], None, 8, source="x").eval_samples is None


# --------------------------------------------------------------------------------------- real path

pytest.importorskip("llamafactory", reason="token counting needs the train extra")


def _direct_counts(model_dir: Path, data_dir: Path, name: str) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    rows = json.loads((data_dir / f"{name}.json").read_text(encoding="utf-8"))
    counts = []
    for row in rows:
        prompt = row["instruction"] + ("\n" + row["input"] if row["input"] else "")
        text = f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{row['output']}<|im_end|>\n"
        counts.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return counts


def _config(model_dir: Path, data_dir: Path, tmp_path: Path, **extra):
    from fixtures.tiny_qwen3 import tiny_train_config

    raw = tiny_train_config(model_dir, data_dir, tmp_path / "out")
    raw.update(extra)
    return config_from_mapping(raw, path=str(tmp_path / "train.yaml"))


def test_lengths_match_a_direct_count(tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path) -> None:
    from oomdoctor.facts.dataset import token_lengths

    train = sorted(_direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_train"))
    evaluation = sorted(_direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_val"))
    calls: list[tuple[int, int | None]] = []
    data = token_lengths(
        _config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path), progress=lambda d, t: calls.append((d, t))
    )

    assert data.source == "tokenized"
    assert data.samples == len(train) == 32
    assert data.max_tokens == train[-1]
    assert data.p50_tokens == percentile(train, 0.5)
    assert data.p95_tokens == percentile(train, 0.95)
    assert (data.eval_samples, data.eval_max_tokens) == (len(evaluation), evaluation[-1])
    assert data.cutoff_len == 256 and data.truncated == 0
    # progress: starts at 0, never goes back, ends at the total of train + eval
    done = [d for d, _ in calls]
    assert done[0] == 0 and done == sorted(done) and done[-1] == 40
    assert all(t == 40 for _, t in calls)


def test_a_cutoff_below_the_longest_sample_is_counted(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    from oomdoctor.facts.dataset import token_lengths

    train = _direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_train")
    proposed = sorted(train)[len(train) // 2]
    data = token_lengths(_config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path), cutoff_len=proposed)
    assert data.cutoff_len == proposed
    assert data.truncated == sum(1 for n in train if n > proposed) > 0
    assert data.max_tokens == max(train)  # the full length, not the truncated one


def test_val_size_splits_the_training_set(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    from oomdoctor.facts.dataset import token_lengths

    config = _config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path, val_size=0.25, eval_dataset=None)
    data = token_lengths(config)
    assert data.samples == 24 and data.eval_samples == 8


def test_max_samples_is_honoured(tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path) -> None:
    from oomdoctor.facts.dataset import token_lengths

    data = token_lengths(_config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path, max_samples=5))
    assert data.samples == 5
    assert data.max_tokens == max(_direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_train")[:5])


def test_no_tokenizer_on_this_machine_is_bad_input(tiny_dataset_dir: Path, tmp_path: Path) -> None:
    from oomdoctor.facts.dataset import token_lengths

    config = _config(
        tmp_path / "nowhere", tiny_dataset_dir, tmp_path, model_name_or_path="acme/NotDownloaded-7B"
    )
    with pytest.raises(BadInput, match="tokenizer"):
        token_lengths(config)


def test_missing_dataset_dir_is_bad_input(tiny_qwen3_dir: Path, tmp_path: Path) -> None:
    from oomdoctor.facts.dataset import token_lengths

    with pytest.raises(BadInput, match="dataset_dir"):
        token_lengths(_config(tiny_qwen3_dir, tmp_path / "no-data", tmp_path))


def test_unknown_dataset_name_is_bad_input(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path
) -> None:
    from oomdoctor.facts.dataset import token_lengths

    with pytest.raises(BadInput, match="dataset"):
        token_lengths(_config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path, dataset="not_in_dataset_info"))


def test_without_llamafactory_it_is_bad_input(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oomdoctor.facts.dataset import token_lengths

    monkeypatch.setitem(sys.modules, "llamafactory", None)
    for name in [m for m in sys.modules if m.startswith("llamafactory.")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(BadInput, match="LLaMA-Factory"):
        token_lengths(_config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path))


def test_lengths_command_prints_json_and_a_progress_line(
    tiny_qwen3_dir: Path, tiny_dataset_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from fixtures.tiny_qwen3 import tiny_train_config
    from oomdoctor.cli import main

    config_path = tmp_path / "train.yaml"
    raw = tiny_train_config(tiny_qwen3_dir, tiny_dataset_dir, tmp_path / "out")
    config_path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    before = config_path.read_bytes()

    assert main(["lengths", "--config", str(config_path), "--json", "--cutoff", "64"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    train = _direct_counts(tiny_qwen3_dir, tiny_dataset_dir, "tiny_train")
    assert data["max_tokens"] == max(train)
    assert data["truncated"] == sum(1 for n in train if n > 64)
    assert "40/40" in err
    assert config_path.read_bytes() == before  # the user's file is untouched

    assert main(["--lang", "zh", "lengths", "--config", str(config_path)]) == 0
    out, _ = capsys.readouterr()
    assert "训练集" in out and f"--longest-tokens {max(train)}" in out


def test_lengths_command_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from oomdoctor.cli import main

    config_path = tmp_path / "train.yaml"
    config_path.write_text(
        "model_name_or_path: acme/NotDownloaded-7B\ndataset: x\ntemplate: qwen3\n", encoding="utf-8"
    )
    assert main(["lengths", "--config", str(config_path)]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "tokenizer" in err


def test_progress_line_rewrites_one_line() -> None:
    from oomdoctor.commands.lengths import ProgressLine

    stream = io.StringIO()
    line = ProgressLine("en", stream=stream, interval_s=3600)
    line(0, 10)
    line(5, 10)  # throttled
    line(10, 10)  # the last one always shows
    line.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and "10/10" in text and text.endswith("\n")
