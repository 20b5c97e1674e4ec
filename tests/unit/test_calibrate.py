"""Calibration (estimate/calibrate.py) on recorded real numbers, the cache, and the calibrated estimate.

The pairs in tests/cases/calibration_pairs.yaml are measured peaks of one setting at two batch sizes (or
lengths): constants fitted on one must reproduce it within 5 % and predict the other within 10 %. Each case is
turned into LLaMA-Factory settings by the adapter of tests/test_measured_peaks.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from oomdoctor import records
from oomdoctor.estimate import estimate
from oomdoctor.estimate.calibrate import (
    Calibration,
    Point,
    calibrate,
    calibration_of,
    default_constants,
    find_calibration,
    predicted,
    run_point,
    save,
    setting_of,
    split_phases,
)
from oomdoctor.facts.config import config_from_mapping
from oomdoctor.facts.model import model_from_name
from test_measured_peaks import measurement_kind, to_llamafactory

PAIRS = Path(__file__).resolve().parents[1] / "cases" / "calibration_pairs.yaml"
VERSIONS = {"torch": "2.14.1", "transformers": "5.6.0", "peft": "0.18.1", "llamafactory": "0.9.5"}


def _cases() -> list[dict[str, Any]]:
    return yaml.safe_load(PAIRS.read_text(encoding="utf-8"))


def _point(case: dict[str, Any], cases: list[dict[str, Any]]) -> tuple[Point, Any]:
    raw, data = to_llamafactory(case, cases)
    config = config_from_mapping(raw, path=f"<case {case['id']}>")
    model = model_from_name(str(case["model"]))
    assert model is not None
    if "litgpt" in str(case["source"]).lower() and model.tie_word_embeddings:
        model = records.replace(model, tie_word_embeddings=False, params=None, embedding_params=None)
    measured = float(case["measured_peak_gib"]) * 1024.0
    kind = measurement_kind(case)
    if kind == "allocated":
        static, per_token = split_phases(config, model, data)["train"]
        return Point("train", "allocated", measured, static, per_token), config
    return run_point(config, model, data, f"{kind}-run", measured), config


def _pairs() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    cases = _cases()
    names = sorted({c["pair"] for c in cases})
    return [
        (n, *(next(c for c in cases if c["pair"] == n and c["role"] == r) for r in ("fit", "predict")))
        for n in names
    ]


@pytest.mark.parametrize(("pair", "fit_case", "predict_case"), _pairs(), ids=[p[0] for p in _pairs()])
def test_fitted_constants_reproduce_and_predict_a_second_size(pair: str, fit_case: dict[str, Any],
                                                              predict_case: dict[str, Any]) -> None:  # fmt: skip
    cases = _cases()
    fit_point, config = _point(fit_case, cases)
    other, _ = _point(predict_case, cases)
    calibration = calibrate([fit_point], default_constants(), setting=setting_of(config, "card", VERSIONS))
    assert calibration.fitted, "one measured point pins at least one constant"
    reproduced = predicted(fit_point, calibration.constants)
    assert reproduced == pytest.approx(fit_point.measured_mib, rel=0.05)
    second = predicted(other, calibration.constants)
    assert second == pytest.approx(other.measured_mib, rel=0.10), (pair, second, other.measured_mib)


def test_a_cumulative_record_fits_each_phase_on_its_own_points() -> None:
    # a CPU probe: RSS at load (no activations), after the longest batch, after validation (a new peak)
    points = [
        Point("load", "rss", 950.0, 300.0, 0.0),
        Point("train", "rss", 1500.0, 320.0, 300.0),
        Point("eval", "rss", 1700.0, 310.0, 600.0),
    ]
    result = calibrate(points, default_constants(), setting={"card": "host"})
    k = result.constants
    assert k["context_mib"] == pytest.approx(650.0)
    assert k["activation_scale"] == pytest.approx((1500 - 650 - 320) / 300, rel=1e-3)
    assert k["eval_activation_scale"] == pytest.approx((1700 - 650 - 310) / 600, rel=1e-3)
    assert result.fitted == ["activation_scale", "eval_activation_scale", "context_mib"]
    assert [row["after_mib"] for row in result.points] == pytest.approx([950.0, 1500.0, 1700.0], rel=1e-3)


def test_an_eval_that_did_not_raise_the_peak_says_nothing_about_eval() -> None:
    points = [Point("load", "rss", 900.0, 300.0, 0.0), Point("train", "rss", 1500.0, 300.0, 300.0),
              Point("eval", "rss", 1500.0, 300.0, 100.0)]  # fmt: skip
    result = calibrate(points, default_constants(), setting={"card": "host"})
    assert "eval_activation_scale" not in result.fitted
    assert result.constants["eval_activation_scale"] == result.constants["activation_scale"]


def test_gpu_points_fit_factor_reserve_and_context() -> None:
    points = [Point("train", "allocated", 6000.0, 2000.0, 5000.0), Point("train", "reserved", 6600.0, 2000.0, 5000.0),
              Point("train", "nvidia-smi", 7100.0, 2000.0, 5000.0)]  # fmt: skip
    result = calibrate(points, default_constants(), setting={"card": "A100"})
    assert result.constants["activation_scale"] == pytest.approx(0.8)
    assert result.constants["reserve_factor"] == pytest.approx(1.1)
    assert result.constants["context_mib"] == pytest.approx(500.0)
    assert set(result.fitted) == {"activation_scale", "reserve_factor", "context_mib"}


def _course() -> tuple[Any, Any]:
    cases = _cases()
    case = next(c for c in cases if c["id"] == "ref-v100-qwen3-0.6b-lora-b4")
    raw, data = to_llamafactory(case, cases)
    return config_from_mapping(raw, path="<course>"), data


def test_the_cache_finds_the_same_setting_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config, _ = _course()
    constants = {**default_constants(), "activation_scale": 0.9}
    calibration = Calibration(setting=setting_of(config, "V100-32GB", VERSIONS), constants=constants,
                              fitted=["activation_scale"], trial="trials/probe-b4")  # fmt: skip
    path = save(calibration, tmp_path / "calibration.json")
    assert path.parent == tmp_path / "cache" / "oomdoctor" / "calibration"
    assert json.loads((tmp_path / "calibration.json").read_text())["constants"]["activation_scale"] == 0.9
    found = find_calibration(config, "V100-32GB", VERSIONS)
    assert found is not None and found.constants["activation_scale"] == 0.9
    assert find_calibration(config, "A100-80GB", VERSIONS) is None
    assert find_calibration(config, "V100-32GB", {**VERSIONS, "torch": "2.9.1"}) is None
    other_precision = records.replace(config, precision="bf16")
    assert find_calibration(other_precision, "V100-32GB", VERSIONS) is None


def test_a_calibrated_estimate_says_which_constants_came_from_calibration() -> None:
    config, data = _course()
    model = model_from_name("Qwen/Qwen3-0.6B")
    assert model is not None
    plain = estimate(config, model, data=data)
    constants = {**default_constants(), "activation_scale": 0.5, "context_mib": 700.0}
    calibration = Calibration(setting={"card": "V100-32GB"}, constants=constants,
                              fitted=["activation_scale", "context_mib"], trial="trials/probe-b4",
                              points=[{"phase": "train", "kind": "nvidia-smi", "measured_mib": 8000.0,
                                       "before_mib": 9000.0, "after_mib": 8100.0}])  # fmt: skip
    tuned = estimate(config, model, data=data, calibration=calibration)
    assert plain.calibration is None
    assert tuned.calibration is not None
    assert tuned.calibration["from_calibration"] == ["activation_scale", "context_mib"]
    assert (
        "calibrated by trial trials/probe-b4: predicted 7.91 GiB, measured 7.81 GiB"
        in tuned.calibration["text"]["en"]
    )
    assert "已按试跑" in tuned.calibration["text"]["zh"]
    assert tuned.terms["logits_loss"] == pytest.approx(plain.terms["logits_loss"] * 0.5, rel=1e-3)
    assert tuned.terms["weights"] == plain.terms["weights"]
    low, _high = tuned.expected_nvidia_smi_mib
    assert low == pytest.approx(tuned.peak_allocated_mib * 1.03 + 700.0, abs=1.0)
    again = estimate(
        config, model, data=data, calibration=calibration_of(tuned)
    )  # what-ifs keep the calibration
    assert again.terms == tuned.terms and again.expected_nvidia_smi_mib == tuned.expected_nvidia_smi_mib
    assert calibration_of(plain) is None
