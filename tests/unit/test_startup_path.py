"""What a start of each headless verb loads, as a user meets it (the user cache warm): none of the modules it
does not need, and only the log patterns the log called for. How long a start takes is measured by
``benchmarks/bench_startup.py`` (as ratios to the bare interpreter), never here.

Each start runs in a fresh interpreter, so an import anywhere in the chain is caught.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "keywords_clean_train.yaml")
LOG = str(ROOT / "configs" / "demo" / "train.log")

TRAINING_STACK = {"torch", "transformers", "datasets", "llamafactory", "peft", "trl", "accelerate"}
# Slow to import and not needed once the user cache holds the validated rules, the bundled tables and the
# parsed config: pydantic (rule validation), yaml (parsing), textual (the app); tempfile and csv (writing a
# cache entry, reading a CSV); shutil (argparse's terminal width, with bz2 and lzma behind it).
NOT_WHEN_WARM = {"pydantic", "yaml", "textual", "tempfile", "csv", "shutil", "bz2", "lzma"}
# The record types of the start-up path are made by oomdoctor.records: the stdlib's dataclasses (which
# compiles each class's methods with exec, and imports inspect) is for the trials, the watch and the app.
RECORDS_NOT_DATACLASSES = {"dataclasses", "inspect"}

_CHILD = """
import contextlib, gc, io, runpy, sys
sys.argv = ["oomdoctor", *sys.argv[1:]]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        runpy.run_module("oomdoctor.cli", run_name="__main__")
    except SystemExit:
        pass
loaded = sorted(sys.modules)  # before this script's own imports below
import json
from oomdoctor.lazyre import LazyPattern
lazy = [o for o in gc.get_objects() if isinstance(o, LazyPattern)]
report = {
    "modules": sorted({m.split(".")[0] for m in loaded}),
    "commands": [m for m in loaded if m.startswith("oomdoctor.commands.")],
    "oomdoctor": [m for m in loaded if m.startswith("oomdoctor.")],
    "lazy": len(lazy),
    "compiled": sum(o._compiled is not None for o in lazy),
    "oom_forms_compiled": None,
    "stdout": out.getvalue(),
}
if "oomdoctor.facts.log_tables" in loaded:
    from oomdoctor.facts.log_tables import tables
    report["oom_forms_compiled"] = sum(f.pattern._compiled is not None for f in tables().oom_forms)
sys.stderr.write("REPORT=" + json.dumps(report) + "\\n")
"""


def _start(cache: Path, *argv: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, check=False, env=env
    )
    line = next((x for x in out.stderr.splitlines() if x.startswith("REPORT=")), None)
    assert line is not None, out.stderr[-2000:]
    return json.loads(line[len("REPORT=") :])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture(scope="module")
def diagnose_starts(cache: Path) -> tuple[dict, dict]:
    argv = ("diagnose", "--config", CONFIG, "--log", LOG, "--json")
    return _start(cache, *argv), _start(cache, *argv)


def test_a_warm_diagnosis_loads_no_parser_validator_or_app(diagnose_starts: tuple[dict, dict]) -> None:
    cold, warm = diagnose_starts
    assert json.loads(warm["stdout"]) == json.loads(cold["stdout"])
    assert "yaml" in cold["modules"] and "pydantic" in cold["modules"]  # the first start parsed and validated
    loaded = set(warm["modules"])
    assert not loaded & NOT_WHEN_WARM, sorted(loaded & NOT_WHEN_WARM)
    assert not loaded & TRAINING_STACK
    assert not loaded & RECORDS_NOT_DATACLASSES, sorted(loaded & RECORDS_NOT_DATACLASSES)


# What a warm `diagnose --json` of the demo does not use: the text report (and shlex behind it), the probe
# calibrations (none stored), the lengths reader (none given), any other verb, and, the demo being a small log
# read whole as its reassembled text, the windowed reader's byte search (RE2).
NOT_FOR_A_JSON_DIAGNOSIS = {
    "oomdoctor.report.diagnosis",
    "oomdoctor.estimate.calibrate",
    "oomdoctor.facts.dataset",
    # readers of rare lines, imported where such a line is met (the demo's log has none)
    "oomdoctor.facts.log_data_parallel",
    "oomdoctor.facts.log_host_report",
    "oomdoctor.facts.log_oom_loose",
}


def test_a_json_diagnosis_loads_only_what_it_uses(diagnose_starts: tuple[dict, dict]) -> None:
    _, warm = diagnose_starts
    loaded = set(warm["oomdoctor"])
    assert "oomdoctor.facts.log" in loaded and "oomdoctor.rules.engine" in loaded  # the report's own list
    assert not loaded & NOT_FOR_A_JSON_DIAGNOSIS, sorted(loaded & NOT_FOR_A_JSON_DIAGNOSIS)
    assert warm["commands"] == ["oomdoctor.commands._inputs", "oomdoctor.commands.diagnose"]
    assert not set(warm["modules"]) & {"shlex", "re2"}


def test_a_diagnosis_compiles_only_the_patterns_its_log_needs(diagnose_starts: tuple[dict, dict]) -> None:
    _, warm = diagnose_starts
    assert 0 < warm["compiled"] < warm["lazy"]
    # the demo's OOM is one form: the other forms' patterns are never searched, so never compiled
    assert warm["oom_forms_compiled"] == 1


def test_a_warm_estimate_reads_the_config_without_yaml(cache: Path) -> None:
    argv = ("estimate", "--config", CONFIG, "--gpu", "V100-32GB", "--json")
    cold, warm = _start(cache, *argv), _start(cache, *argv)
    assert json.loads(warm["stdout"]) == json.loads(cold["stdout"])
    loaded = set(warm["modules"])
    assert not loaded & (NOT_WHEN_WARM | {"re2"}), sorted(loaded & (NOT_WHEN_WARM | {"re2"}))
    assert not loaded & (TRAINING_STACK | RECORDS_NOT_DATACLASSES)


def test_the_help_loads_no_verb_module_and_compiles_no_log_pattern(cache: Path) -> None:
    _start(cache, "--help")  # the first start keeps the help texts (catalogue-help-v1) in the user cache
    start = _start(cache, "--help")
    assert "diagnose" in start["stdout"]
    loaded = set(start["modules"])
    assert not loaded & (NOT_WHEN_WARM | TRAINING_STACK | {"json", "re2", "dataclasses"})
    assert start["commands"] == []  # the verb list is all the top-level help shows
    assert start["oom_forms_compiled"] is None  # the log reader was never imported


def test_a_text_report_defines_its_records_without_dataclasses(cache: Path) -> None:
    argv = (
        "diagnose",
        "--config",
        CONFIG,
        "--log",
        LOG,
        "--lengths",
        str(ROOT / "configs" / "demo" / "lengths.json"),
    )
    _start(cache, *argv)
    start = _start(cache, *argv)
    assert (
        "oomdoctor.report.diagnosis" in start["oomdoctor"] and "oomdoctor.facts.dataset" in start["oomdoctor"]
    )
    assert not set(start["modules"]) & RECORDS_NOT_DATACLASSES
