"""Build the facts of a rule case (tests/rules/cases/*.yaml) the way ``oomdoctor.api.gather`` does, from
inline config, log text, GPU, model, data, estimate, answers and environment.

The config and the log go through the real readers (``config_from_mapping``, ``parse_log_text``); the
estimate is the real estimator unless the case pins one (``estimate:``) to test a rule in isolation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from oomdoctor.estimate.types import Estimate
from oomdoctor.facts.types import DataFacts, GpuDevice, GpuFacts, GpuProcess, ModelFacts
from oomdoctor.rules.assemble import facts_of

HERE = Path(__file__).parent
CASES_DIR = HERE / "cases"
LOGS_DIR = HERE / "logs"
CONFIGS_DIR = HERE / "configs"


def load_case_files() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, yaml.safe_load(p.read_text(encoding="utf-8"))) for p in sorted(CASES_DIR.glob("*.yaml"))]


def gpu_from(spec: dict[str, Any] | None) -> GpuFacts | None:
    if spec is None:
        return None
    devices = []
    for i, d in enumerate(spec.get("devices", [])):
        cc = d.get("compute_capability")
        devices.append(
            GpuDevice(
                index=d.get("index", i),
                name=d.get("name", "GPU"),
                total_mib=float(d["total_mib"]),
                used_mib=d.get("used_mib"),
                compute_capability=tuple(cc) if cc else None,
                bf16_supported=d.get("bf16_supported", (tuple(cc) >= (8, 0)) if cc else None),
                processes=[
                    GpuProcess(pid=p["pid"], used_mib=p.get("used_mib"), name=p.get("name"))
                    for p in d.get("processes", [])
                ],
            )
        )
    return GpuFacts(
        available=bool(devices), devices=devices, reason=None if devices else "no GPU in this case"
    )


def config_of(case: dict[str, Any]) -> dict[str, Any] | None:
    """``config_base`` (tests/rules/configs/<name>.yaml) with ``config`` on top; a null value removes a key."""
    if case.get("config_base") is None and case.get("config") is None:
        return None
    raw: dict[str, Any] = {}
    if case.get("config_base"):
        raw = yaml.safe_load((CONFIGS_DIR / f"{case['config_base']}.yaml").read_text(encoding="utf-8"))
    for key, value in (case.get("config") or {}).items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


def log_of(case: dict[str, Any]) -> str | None:
    """``log_files`` (tests/rules/logs/<name>.txt) joined, ``log_replace`` applied, inline ``log`` appended."""
    if not case.get("log_files") and case.get("log") is None:
        return None
    text = "".join(
        (LOGS_DIR / f"{name}.txt").read_text(encoding="utf-8") for name in case.get("log_files", [])
    )
    for old, new in (case.get("log_replace") or {}).items():
        if old not in text:
            raise AssertionError(f"log_replace: {old!r} is not in the log")
        text = text.replace(old, new)
    return text + (case.get("log") or "")


def facts_from_case(case: dict[str, Any]) -> Any:
    from oomdoctor.facts.config import config_from_mapping
    from oomdoctor.facts.log import parse_log_text

    text = log_of(case)
    log = parse_log_text(text) if text is not None else None
    if log is not None and case.get("log_card_name"):
        log.card_name = case["log_card_name"]  # what the log reader reads from a pasted nvidia-smi table
    raw = config_of(case)
    config = config_from_mapping(raw) if raw is not None else None
    gpu = gpu_from(case.get("gpu"))
    model = ModelFacts(**case["model"]) if case.get("model") else None
    data = DataFacts(**case["data"]) if case.get("data") else None
    est = None  # assemble estimates on the settled card and world size unless the case pins one
    if case.get("estimate"):
        spec = dict(case["estimate"])
        spec.setdefault("expected_nvidia_smi_mib", (0.0, 0.0))
        spec.setdefault("phases", {})
        spec.setdefault("padded_len", 0)
        spec.setdefault("padded_len_source", "cutoff_len")
        spec.setdefault("micro_batch", 1)
        spec.setdefault("eval_batch", 1)
        spec.setdefault("peak_allocated_mib", sum(spec["terms"].values()))
        est = Estimate(**spec)
    return facts_of(
        config=config,
        log=log,
        gpu=gpu,
        model=model,
        data=data,
        estimate=est,
        answers=dict(case.get("answers") or {}),
        env=dict(case.get("env") or {}),
        capacity_mib=case.get("gpu_total_mib"),
        world_size=case.get("world_size"),
    )
