"""fit's choice (trial/fit.py) on the course's config, its step down after a failure, and its bad inputs.

The real verification with probes runs in tests/integration/test_real_probe.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.verbs import run_verb
from oomdoctor.estimate.calibrate import default_constants
from oomdoctor.facts.config import read_config
from oomdoctor.facts.model import model_from_name
from oomdoctor.facts.types import DataFacts
from oomdoctor.trial.fit import Predictor, choose, raised_by_failure

COURSE = Path(__file__).resolve().parents[2] / "configs" / "keywords_clean_train.yaml"
V100_MIB = 32510.0
LENGTHS = DataFacts(source="given", max_tokens=957, eval_max_tokens=604)


@pytest.fixture
def predict() -> Predictor:
    config = read_config(COURSE)
    model = model_from_name("Qwen/Qwen3-0.6B")
    assert model is not None
    return Predictor(config, model, LENGTHS, None)


def test_the_course_config_keeps_batch_4_only_with_a_smaller_eval_batch(predict: Predictor) -> None:
    limit = V100_MIB * 0.9
    chosen = choose(predict, limit)
    assert chosen is not None
    # the course's run (batch 4, eval batch 8) ran out: the estimate agrees, and fit keeps batch 4 by giving
    # the validation a smaller batch (chosen separately), the effective batch 32 kept
    assert predict(4, 8, 8).predicted_mib > limit
    assert predict(8, 4, 1).train_mib > limit  # the next larger micro-batch does not fit at all
    assert (chosen.micro_batch, chosen.accumulation) == (4, 8) and chosen.eval_batch < 8
    assert chosen.predicted_mib <= limit
    assert predict(4, 8, chosen.eval_batch + 1).predicted_mib > limit  # the largest eval batch that fits
    assert chosen.changes(predict.config) == {"per_device_eval_batch_size": [8, chosen.eval_batch]}


def test_after_a_failure_the_next_candidate_is_smaller_and_new(predict: Predictor) -> None:
    first = choose(predict, V100_MIB * 0.9)
    assert first is not None
    after_train = choose(predict, V100_MIB * 0.9, below=first, failed_phase="train")
    assert after_train is not None and after_train.micro_batch < first.micro_batch
    assert after_train.micro_batch * after_train.accumulation == 32
    after_eval = choose(predict, V100_MIB * 0.9, below=first, failed_phase="eval")
    assert after_eval is not None
    assert (after_eval.micro_batch, after_eval.eval_batch) != (first.micro_batch, first.eval_batch)
    assert after_eval.micro_batch <= first.micro_batch


def test_a_failure_raises_the_factor_until_the_failed_config_no_longer_fits(predict: Predictor) -> None:
    first = choose(predict, V100_MIB * 0.9)
    assert first is not None
    raised = raised_by_failure(None, predict, first, "train", V100_MIB * 0.9)
    assert raised.constants["activation_scale"] > default_constants()["activation_scale"]
    again = Predictor(predict.config, predict.model, predict.data, raised)
    assert again(first.micro_batch, first.accumulation, first.eval_batch).train_mib > V100_MIB * 0.9


def test_fit_bad_input_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_verb("fit", ["--config", str(COURSE), "--out", str(tmp_path / "f"), "--margin", "1.5"]) == 2
    assert "--margin" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert (
        run_verb("fit", ["--config", str(COURSE), "--out", str(tmp_path / "taken"), "--gpu-mib", "32510"])
        == 2
    )
    assert "exists" in capsys.readouterr().err
    assert run_verb("fit", ["--config", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "g")]) == 2
    assert not (tmp_path / "f").exists() and not (tmp_path / "g").exists()


def test_the_report_names_the_tries_and_the_winner_in_both_languages() -> None:
    from oomdoctor.commands.fit import report
    from oomdoctor.trial.fit import Candidate, FitResult, Tried

    failed = Candidate(4, 8, 8, 28000.0, 26000.0, 28000.0)
    winner = Candidate(2, 16, 8, 23000.0, 13000.0, 23000.0)
    result = FitResult(budget_mib=32510.0, margin=0.1, limit_mib=29259.0, effective_batch=32, world_size=1,
                       calibrated_by="trials/probe-b2",
                       tried=[Tried(failed, "fit/tried/1-b4", "oom", False, 32000.0, "eval", 40.0),
                              Tried(winner, "fit/tried/2-b2", "ok", True, 22000.0, None, 38.0)],
                       winner=winner, folder="fit", command="llamafactory-cli train fit/config.yaml")  # fmt: skip
    en = "\n".join(report(result, "en"))
    zh = "\n".join(report(result, "zh"))
    assert "failed at validation on the longest eval batch" in en and "passed" in en
    assert "Winner: micro-batch 2, accumulation 16, eval batch 8 (effective batch 32, kept)" in en
    assert "llamafactory-cli train fit/config.yaml" in en and "trials/probe-b2" in en
    assert "结果:单卡 batch 2,梯度累积 16" in zh and "保持不变" in zh
    data = result.to_json()
    assert (
        data["probes"] == 2 and data["effective_batch_kept"] is True and data["effective_batch_after"] == 32
    )
