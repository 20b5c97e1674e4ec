"""A diagnosis looks for a probe's calibration only where one is stored: with none (the usual case) it reads no
calibration code; with one stored for the setting, its estimate and what-ifs rest on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomdoctor import api, records
from oomdoctor.estimate.calibrate import HOST_CARD, Calibration, default_constants, save, setting_of
from oomdoctor.facts.gpu import FakeGpuSource

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "keywords_clean_train.yaml"
LOG = ROOT / "configs" / "demo" / "train.log"
NO_GPU = FakeGpuSource.unavailable()


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))


def _store_calibration_for_the_demo(scale: float) -> None:
    plain = api.gather(CONFIG, LOG, gpu_source=NO_GPU)
    assert plain.config is not None and plain.log is not None
    card = plain.log.card_name or HOST_CARD
    constants = {**default_constants(), "activation_scale": scale}
    save(
        Calibration(setting=setting_of(plain.config, card), constants=constants, fitted=["activation_scale"])
    )


def test_without_a_stored_calibration_the_diagnosis_has_none(tmp_path: Path) -> None:
    facts = api.gather(CONFIG, LOG, gpu_source=NO_GPU)
    assert facts.estimate is not None and facts.estimate.calibration is None and facts.calibration() is None
    assert not (tmp_path / "oomdoctor" / "calibration").exists()


def test_a_stored_calibration_is_found_and_used_by_the_what_ifs() -> None:
    before = api.run_diagnosis(CONFIG, LOG, gpu_source=NO_GPU)
    _store_calibration_for_the_demo(scale=3.0)
    facts = api.gather(CONFIG, LOG, gpu_source=NO_GPU)
    assert facts.estimate is not None and facts.estimate.calibration is not None
    calibration = facts.calibration()
    assert calibration is not None and calibration.constants["activation_scale"] == 3.0
    after = api.run_diagnosis(CONFIG, LOG, gpu_source=NO_GPU)
    assert "estimate.calibrated" in {f.id for f in after.findings}
    assert "estimate.calibrated" not in {f.id for f in before.findings}
    assert _effects(before) and _effects(before) != _effects(after)  # the what-ifs moved with it


def _effects(diagnosis: api.Diagnosis) -> list[object]:
    proposals = [diagnosis.proposal, *diagnosis.alternatives]
    return [records.asdict(p.effect) for p in proposals if p is not None and p.effect is not None]
