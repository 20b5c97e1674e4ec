"""The probe / calibration / fit check on a real GPU (issue 9), one prepared run of a few minutes.

The course config (Qwen3-0.6B LoRA r8, fp16, checkpointing on, cutoff 2048) on a random-initialised
Qwen3-0.6B-shaped model (no download; the tokenizer is the test suite's small offline one) and a synthetic
dataset whose longest training sample is about the course's 957 tokens (validation about 604), capped to 32 GiB
of the card with ``torch.cuda.set_per_process_memory_fraction`` (benchmarks/lf_capped.py is the launcher):

1. ``estimate`` of batch 4 and batch 2 before any calibration;
2. ``trial --probe`` at batch 2 / accumulation 16, then at batch 4 / accumulation 8 (NVML samples, RECORD_VRAM);
   the batch-2 probe calibrates the estimate (the cache is this run's own);
3. per milestone: torch allocated / reserved and nvidia-smi peaks next to the estimate before and after
   calibration (the batch-4 figures are predicted from the batch-2 calibration);
4. ``fit --gpu-mib 32768``: its answer.

    bash benchmarks/gpu_probe_check.sh          # writes gpu_probe_check.json / .log under $OUT or benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

CAP_MIB = 32768
COURSE = REPO / "configs" / "keywords_clean_train.yaml"


def build_model(folder: Path) -> Path:
    """The test suite's offline tokenizer with a random Qwen3-0.6B-shaped model (shape from the model table)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from fixtures.tiny_qwen3 import build_tiny_qwen3
    from oomdoctor.facts.model import model_from_name

    build_tiny_qwen3(folder)  # tokenizer (and a tiny model, replaced below)
    shape = model_from_name("Qwen/Qwen3-0.6B")
    assert shape is not None
    config = Qwen3Config(vocab_size=shape.vocab_size, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
                         num_hidden_layers=shape.num_layers, num_attention_heads=shape.num_attention_heads,
                         num_key_value_heads=shape.num_key_value_heads, head_dim=shape.head_dim,
                         max_position_embeddings=32768, tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=2, pad_token_id=0, torch_dtype="float16")  # fmt: skip
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).to(torch.float16).save_pretrained(folder, safe_serialization=True)
    return folder


def build_data(folder: Path) -> Path:
    """400 training rows (the longest about 950 tokens, near the end) and 100 validation rows (about 600)."""
    from fixtures.tiny_qwen3 import write_tiny_dataset

    short = write_tiny_dataset(folder / "short", n=396, n_val=96, words_per_sample=(20, 250))
    long = write_tiny_dataset(folder / "long", n=4, n_val=4, words_per_sample=(640, 680), seed=1)
    evals = write_tiny_dataset(folder / "evals", n=1, n_val=4, words_per_sample=(385, 400), seed=2)
    data = folder / "data"
    data.mkdir()
    train = json.loads((short / "tiny_train.json").read_text()) + json.loads(
        (long / "tiny_train.json").read_text()
    )
    val = json.loads((short / "tiny_val.json").read_text()) + json.loads(
        (evals / "tiny_val.json").read_text()
    )
    (data / "keywords_train.json").write_text(json.dumps(train), encoding="utf-8")
    (data / "keywords_validation.json").write_text(json.dumps(val), encoding="utf-8")
    info = {"keywords_train": {"file_name": "keywords_train.json"},
            "keywords_validation": {"file_name": "keywords_validation.json"}}  # fmt: skip
    (data / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return data


def course_config(work: Path, model: Path, data: Path, batch: int, accumulation: int) -> Path:
    import yaml

    raw = yaml.safe_load(COURSE.read_text(encoding="utf-8"))
    raw.update({"model_name_or_path": str(model), "dataset_dir": str(data), "output_dir": str(work / "saves"),
                "per_device_train_batch_size": batch, "gradient_accumulation_steps": accumulation,
                "report_to": "none", "overwrite_cache": True, "preprocessing_num_workers": 4})  # fmt: skip
    path = work / f"course-b{batch}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def oomdoctor(*args: str, env: dict[str, str]) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "oomdoctor.cli", "--lang", "en", *args], capture_output=True,
                          text=True, env=env)  # fmt: skip
    print(
        f"$ oomdoctor {shlex.join(args)}  ({time.monotonic() - started:.1f} s, exit {done.returncode})",
        flush=True,
    )
    if done.stderr.strip():
        print(done.stderr[-1500:], flush=True)
    try:
        return json.loads(done.stdout)
    except ValueError:
        print(done.stdout[-3000:], flush=True)
        return {"exit": done.returncode}


def milestone_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: m.get(k) for k in ("name", "passed", "step", "peak_mib", "vram_allocated_gib", "vram_reserved_gib")}
            for m in record.get("milestones") or []]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "gpu_probe_work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "XDG_CACHE_HOME": str(work / "cache"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HOME": str(work / "hf")}  # fmt: skip
    model = (
        build_model(work / "model")
        if not (work / "model" / "model.safetensors").is_file()
        else work / "model"
    )
    data = build_data(work) if not (work / "data").is_dir() else work / "data"
    configs = {4: course_config(work, model, data, 4, 8), 2: course_config(work, model, data, 2, 16)}
    launcher = f"{shlex.quote(sys.executable)} {shlex.quote(str(REPO / 'benchmarks' / 'lf_capped.py'))} --mib {CAP_MIB} train"
    lengths = oomdoctor("lengths", "--config", str(configs[4]), "--json", env=env)
    report: dict[str, Any] = {"cap_mib": CAP_MIB, "lengths": lengths, "before": {}, "after": {}, "probes": {}}
    for batch, path in configs.items():
        report["before"][batch] = oomdoctor("estimate", "--config", str(path), "--gpu-mib", str(CAP_MIB),
                                            "--longest-tokens", str(lengths.get("max_tokens", 957)),
                                            "--eval-longest-tokens", str(lengths.get("eval_max_tokens") or 604),
                                            "--no-calibration", "--json", env=env)  # fmt: skip
    for batch in (2, 4):
        folder = work / f"probe-b{batch}"
        record = oomdoctor("trial", "--config", str(configs[batch]), "--probe", "--out", str(folder),
                           "--launcher", launcher, "--timeout", "300", "--json", env=env)  # fmt: skip
        report["probes"][batch] = {"outcome": record.get("outcome"), "peak_nvidia_smi_mib": record.get("peak_memory_mib"),
                                   "vram_allocated_gib": record.get("vram_allocated_gib"),
                                   "vram_reserved_gib": record.get("vram_reserved_gib"),
                                   "milestones": milestone_rows(record), "calibration": record.get("calibration")}  # fmt: skip
        if batch == 2:  # the batch-4 figures below are predicted from the batch-2 probe's calibration
            for b, path in configs.items():
                report["after"][b] = oomdoctor("estimate", "--config", str(path), "--gpu-mib", str(CAP_MIB),
                                               "--longest-tokens", str(lengths.get("max_tokens", 957)),
                                               "--eval-longest-tokens", str(lengths.get("eval_max_tokens") or 604),
                                               "--json", env=env)  # fmt: skip
    report["fit"] = oomdoctor("fit", "--config", str(configs[4]), "--out", str(work / f"fit-{int(time.time())}"),
                              "--gpu-mib", str(CAP_MIB), "--launcher", launcher, "--timeout", "300", "--json",
                              env=env)  # fmt: skip
    print_summary(report)
    (out / "gpu_probe_check.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    return 0


def print_summary(report: dict[str, Any]) -> None:
    print(
        "\nbatch  measured: allocated / reserved / nvidia-smi MiB   estimate before: allocated, smi band   after (calibrated)"
    )
    for batch in (4, 2):
        probe = report["probes"].get(batch, {})
        alloc = (probe.get("vram_allocated_gib") or 0) * 1024
        reserved = (probe.get("vram_reserved_gib") or 0) * 1024
        before, after = report["before"].get(batch, {}), report["after"].get(batch, {})
        print(
            f"{batch:>5}  {alloc:>9,.0f} / {reserved:>9,.0f} / {probe.get('peak_nvidia_smi_mib') or 0:>9,.0f}"
            f"   {before.get('peak_allocated_mib', 0):>9,.0f}, {before.get('expected_nvidia_smi_mib')}"
            f"   {after.get('peak_allocated_mib', 0):>9,.0f}, {after.get('expected_nvidia_smi_mib')}"
            f"  {(after.get('calibration') or {}).get('from_calibration')}"
        )
    fit = report.get("fit", {})
    print(
        "fit:", {k: fit.get(k) for k in ("ok", "probes", "winner", "effective_batch_kept", "calibrated_by")}
    )


if __name__ == "__main__":
    raise SystemExit(main())
