"""The wheel carries what an installed oomdoctor needs beside its code: the decision nodes, the bundled
configs (demo, DeepSpeed templates), the data tables, the catalogue of texts and the app's stylesheet."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_holds_rules_configs_and_data(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("oomdoctor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    rules = {f"oomdoctor/_rules/{p.name}" for p in (ROOT / "rules").glob("*.yaml")}
    assert rules and rules <= names
    for bundled in (
        "keywords_clean_train.yaml",
        "demo/train.log",
        "demo/lengths.json",
        "deepspeed/ds_z3_config.json",
    ):
        assert f"oomdoctor/_configs/{bundled}" in names
    for data in ("facts/lf_defaults.yaml", "facts/log_markers.yaml", "facts/model_table.yaml",
                 "estimate/memory_model.yaml", "estimate/gpu_cards.yaml", "trial/field_effects.yaml",
                 "tui/oomdoctor.tcss", "catalogue/en.yaml", "catalogue/zh.yaml"):  # fmt: skip
        assert f"oomdoctor/{data}" in names
    assert not any("tests/" in n or n.startswith("benchmarks/") for n in names)
