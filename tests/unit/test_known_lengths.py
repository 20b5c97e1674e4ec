"""Real sample lengths the user brings (a saved `oomdoctor lengths --json`, or numbers typed in) reach the
estimate and the proposal, and follow-up commands carry them so `patch` sees what `diagnose` saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomdoctor.api import gather
from oomdoctor.cli import main
from oomdoctor.errors import BadInput
from oomdoctor.facts.dataset import known_lengths, read_lengths_file
from oomdoctor.resources import configs_dir

CONFIG = configs_dir() / "keywords_clean_train.yaml"
LOG = configs_dir() / "demo" / "train.log"
DEMO_LENGTHS = configs_dir() / "demo" / "lengths.json"


def test_demo_lengths_file_reads_as_the_course_measured_it() -> None:
    data = read_lengths_file(DEMO_LENGTHS)
    assert (data.samples, data.max_tokens, data.eval_samples, data.eval_max_tokens) == (1600, 957, 200, 604)
    assert data.truncated == 0 and data.source.startswith("given")


def test_typed_numbers_override_the_file_and_stand_alone() -> None:
    assert known_lengths(None, None, None) is None
    alone = known_lengths(None, 700, None)
    assert alone is not None and (alone.max_tokens, alone.eval_max_tokens, alone.source) == (
        700,
        None,
        "given",
    )
    mixed = known_lengths(DEMO_LENGTHS, 1200, None)
    assert mixed is not None and (mixed.max_tokens, mixed.eval_max_tokens, mixed.samples) == (1200, 604, 1600)


@pytest.mark.parametrize(
    "content", ["not json", "[1, 2]", '{"max_tokens": 0}', '{"samples": 3}', '{"max_tokens": "957"}']
)
def test_a_bad_lengths_file_is_bad_input(tmp_path: Path, content: str) -> None:
    path = tmp_path / "lengths.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BadInput) as err:
        read_lengths_file(path)
    assert "\n" not in str(err.value) and "oomdoctor lengths" in str(err.value)


def test_real_lengths_move_the_padded_length_and_the_estimate() -> None:
    padded_to_cutoff = gather(CONFIG, LOG)
    measured = gather(CONFIG, LOG, lengths_file=DEMO_LENGTHS)
    assert padded_to_cutoff.estimate is not None and measured.estimate is not None
    assert padded_to_cutoff.estimate.padded_len_source == "cutoff_len"
    assert (measured.estimate.padded_len, measured.estimate.padded_len_source) == (960, "longest_sample")
    assert measured.estimate.terms["logits_loss"] < padded_to_cutoff.estimate.terms["logits_loss"] / 2


def test_diagnose_and_patch_see_the_same_lengths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--config", str(CONFIG), "--log", str(LOG), "--lengths", str(DEMO_LENGTHS)]
    assert main(["--lang", "en", "diagnose", *args]) == 1
    report = capsys.readouterr().out
    assert f"--lengths {DEMO_LENGTHS}" in report  # the printed patch command carries the file
    assert "lowering cutoff_len to anything above 957 saves nothing" in report

    assert main(["diagnose", *args, "--json"]) == 1
    diagnosis = json.loads(capsys.readouterr().out)
    effect = diagnosis["proposal"]["effect"]
    assert effect["before_mib"] < 10_000  # padded to 960, not to cutoff_len 2048

    out = tmp_path / "trial"
    assert main(["patch", *args, "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    change = json.loads((out / "change.json").read_text(encoding="utf-8"))
    assert change["rule"] == diagnosis["proposal"]["rule"]
    assert change["effect"]["before_mib"] == pytest.approx(effect["before_mib"])
    assert Path(written["config"]).is_file()


def test_the_diagnosis_names_the_largest_micro_batch_that_fits() -> None:
    """On the course's card with its real lengths, the estimate's answer is the course's own: 2 x 16."""
    from oomdoctor.rules.engine import diagnose

    findings = {f.id: f for f in diagnose(gather(CONFIG, LOG, lengths_file=DEMO_LENGTHS)).findings}
    text = findings["fitting_micro_batch"].text["en"]
    assert ": 2, with gradient_accumulation_steps 16 to keep 32 samples" in text
    # with no card known (no log, no NVML, no --gpu-mib) the estimate cannot say what fits
    unplaced = diagnose(gather(CONFIG, None, lengths_file=DEMO_LENGTHS, answers={"phase": "first_batch"}))
    assert "fitting_micro_batch" not in {f.id for f in unplaced.findings}


def test_a_model_shape_too_partial_to_estimate_still_diagnoses(tmp_path: Path) -> None:
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2}), "utf-8")
    config = tmp_path / "train.yaml"
    config.write_text(CONFIG.read_text(encoding="utf-8").replace("Qwen/Qwen3-0.6B", str(model_dir)), "utf-8")
    facts = gather(config, LOG)
    assert facts.model is not None and facts.model.hidden_size == 64
    assert facts.estimate is None  # no heads, no vocabulary: nothing to estimate with
    from oomdoctor.rules.engine import diagnose

    assert diagnose(facts).proposal is not None
