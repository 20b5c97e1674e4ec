"""Measure the course's run on a real GPU and print it next to oomdoctor's estimate.

The course's pair (V100-32GB, Qwen3-0.6B, LoRA r8 on all linears, fp16 AMP, gradient checkpointing, longest
sample 957 tokens, eval batch 8 with the longest eval sample at 604) is replayed with a random-initialised
Qwen3-0.6B-shaped model (config only, nothing downloaded) in a transformers + PEFT loop that does what
LLaMA-Factory does for memory: 16-bit base weights, LoRA parameters upcast to fp32, re-entrant gradient
checkpointing with input grads, fp16 autocast with a grad scaler, AdamW (foreach), batches padded to their
longest sample rounded up to 8, the loss computed inside the model. The process is capped at 32 GiB with
``torch.cuda.set_per_process_memory_fraction`` so the allocator meets a V100-sized wall.

Per micro-batch size it records torch's max allocated / reserved per phase (load, train, eval), the
allocator's retries, and the NVML peak of the card sampled every 50 ms, then writes JSON into ``$OUT`` (or
``benchmarks/results/``). Run on a GPU machine with ``benchmarks/gpu_check.sh``; ``--dry-run`` prints the
plan and the estimate side without torch (what the CPU tests exercise).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

COURSE_CONFIG = REPO / "configs" / "keywords_clean_train.yaml"
MIB = 1024 * 1024
PAD_MULTIPLE = 8


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Replay the course's run on a GPU and compare with the estimate.")
    parser.add_argument("--batches", default="4,2", help="micro-batch sizes to run, comma-separated (default 4,2)")
    parser.add_argument("--effective-batch", type=int, default=32, help="batch x accumulation, kept for every size")
    parser.add_argument("--micro-steps", type=int, default=24, help="training micro-batches per size")
    parser.add_argument("--eval-batches", type=int, default=4, help="eval batches per size")
    parser.add_argument("--longest", type=int, default=957, help="longest training sample (tokens)")
    parser.add_argument("--eval-longest", type=int, default=604, help="longest eval sample (tokens)")
    parser.add_argument("--eval-batch", type=int, default=8, help="per_device_eval_batch_size (LLaMA-Factory default 8)")
    parser.add_argument("--cap-gib", type=float, default=32.0, help="per-process memory cap (0: none)")
    parser.add_argument("--card-mib", type=float, default=32510.0, help="card size the estimate checks against")
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a model the built-in table knows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for the JSON (default $OUT, else benchmarks/results)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the estimates; no torch")
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu only smoke-tests the loop")
    parser.add_argument("--layers", type=int, default=None, help="override the layer count (smoke tests)")
    args = parser.parse_args(argv)
    try:
        args.batch_sizes = [int(b) for b in str(args.batches).split(",") if b.strip()]
    except ValueError:
        parser.error(f"--batches expects whole numbers, got {args.batches!r}")
    if not args.batch_sizes or any(b < 1 or args.effective_batch % b for b in args.batch_sizes):
        parser.error("every micro-batch size must divide --effective-batch")
    if args.longest < 2 or args.eval_longest < 2:
        parser.error("--longest and --eval-longest must be at least 2 tokens")
    return args


def out_dir(args: argparse.Namespace) -> Path:
    folder = Path(args.out or os.environ.get("OUT") or REPO / "benchmarks" / "results")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def padded(length: int) -> int:
    return -(-length // PAD_MULTIPLE) * PAD_MULTIPLE


def length_schedule(batch: int, steps: int, longest: int, *, seed: int, worst_at: int = 3) -> list[list[int]]:
    """Sample lengths per micro-batch: varied like SFT data (so the allocator sees new shapes), with the
    longest sample in micro-batch ``worst_at`` (the course's warning came mid-run, not at step 1)."""
    rng = random.Random(seed)
    low = max(1, longest // 5)
    schedule = [[rng.randint(low, longest - 1) for _ in range(batch)] for _ in range(steps)]
    schedule[min(worst_at, steps - 1)][0] = longest
    return schedule


def estimate_side(args: argparse.Namespace, batch: int) -> dict[str, Any]:
    """oomdoctor's estimate for the course config at this micro-batch (no torch)."""
    from oomdoctor.estimate import estimate, with_changes
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.model import model_from_name
    from oomdoctor.facts.types import DataFacts, to_jsonable

    config = read_config(COURSE_CONFIG)
    config = with_changes(config, {
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": args.effective_batch // batch,
        "per_device_eval_batch_size": args.eval_batch,
        "model_name_or_path": args.model,
    })
    model = model_from_name(args.model)
    if model is None:
        raise SystemExit(f"gpu_check: {args.model!r} is not in the built-in model table")
    data = DataFacts(source="given", max_tokens=args.longest, eval_max_tokens=args.eval_longest)
    result = estimate(config, model, data=data, gpu_total_mib=args.card_mib)
    return to_jsonable(result)


def compare(measured: dict[str, Any], estimated: dict[str, Any]) -> list[dict[str, Any]]:
    """Like with like: torch max allocated per phase vs the allocated estimate; NVML peak vs the band."""
    rows = []
    for phase in ("load", "train", "eval"):
        got = measured.get("phases", {}).get(phase, {}).get("max_allocated_mib")
        want = estimated["phases"].get(phase)
        if got and want:
            rows.append({"what": f"{phase}: max allocated", "measured_mib": got, "estimated_mib": want,
                         "error": want / got - 1.0})
    nvml = measured.get("nvml_peak_used_mib")
    low, high = estimated["expected_nvidia_smi_mib"]
    if nvml:
        rows.append({"what": "nvidia-smi peak vs band", "measured_mib": nvml, "estimated_mib": [low, high],
                     "inside": low <= nvml <= high})
    return rows


class NvmlPeak:
    """Samples the card's used memory every ``interval_s`` in a thread; fails soft without NVML."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.peak_mib: float | None = None
        self.phase_peak: dict[str, float] = {}
        self.phase = "load"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            index = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0] or 0)
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
        except Exception as err:  # no driver or no bindings: report, do not fail the check
            self.reason = f"NVML unavailable: {err}"
        else:
            self.reason = None

    def _run(self) -> None:
        while not self._stop.is_set():
            used = self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used / MIB
            self.peak_mib = max(self.peak_mib or 0.0, used)
            self.phase_peak[self.phase] = max(self.phase_peak.get(self.phase, 0.0), used)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> NvmlPeak:
        if self._handle is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def run_one(args: argparse.Namespace, batch: int) -> dict[str, Any]:
    """One fresh process-state run at this micro-batch: load, train micro-batches, eval."""
    import gc

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from oomdoctor.facts.model import model_from_name

    shape = model_from_name(args.model)
    assert shape is not None
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    half = torch.float16 if cuda else torch.bfloat16  # CPU smoke runs use bf16 autocast
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    phases: dict[str, dict[str, float]] = {}

    def close_phase(name: str) -> None:
        if not cuda:
            phases[name] = {"max_allocated_mib": 0.0, "max_reserved_mib": 0.0}
            return
        torch.cuda.synchronize()
        phases[name] = {
            "max_allocated_mib": torch.cuda.max_memory_allocated() / MIB,
            "max_reserved_mib": torch.cuda.max_memory_reserved() / MIB,
        }
        torch.cuda.reset_peak_memory_stats()

    with NvmlPeak() as nvml:
        started = time.perf_counter()
        config = Qwen3Config(
            vocab_size=shape.vocab_size, hidden_size=shape.hidden_size, intermediate_size=shape.intermediate_size,
            num_hidden_layers=args.layers or shape.num_layers, num_attention_heads=shape.num_attention_heads,
            num_key_value_heads=shape.num_key_value_heads, head_dim=shape.head_dim,
            tie_word_embeddings=shape.tie_word_embeddings, max_position_embeddings=40960, use_cache=False,
        )
        config._attn_implementation = "sdpa"
        torch.manual_seed(args.seed)
        default_dtype = torch.get_default_dtype()
        torch.set_default_dtype(half)  # build in 16 bit on the device, as LLaMA-Factory loads fp16 weights
        try:
            with device:
                model = Qwen3ForCausalLM(config)
        finally:
            torch.set_default_dtype(default_dtype)
        model = get_peft_model(model, LoraConfig(
            r=8, lora_alpha=16, lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        ))
        for param in model.parameters():
            if param.requires_grad:
                param.data = param.data.float()  # LLaMA-Factory upcasts trainable params to fp32
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        model.enable_input_require_grads()
        close_phase("load")

        nvml.phase = "train"
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5)
        scaler = torch.amp.GradScaler(device.type, enabled=cuda)
        accumulation = args.effective_batch // batch
        model.train()
        rng = random.Random(args.seed + batch)
        for step, lengths in enumerate(length_schedule(batch, args.micro_steps, args.longest, seed=args.seed + batch)):
            ids, mask, labels = _batch(lengths, shape.vocab_size, rng, device)
            with torch.autocast(device.type, dtype=half):
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss / accumulation
            scaler.scale(loss).backward()
            if (step + 1) % accumulation == 0 or step + 1 == args.micro_steps:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
        close_phase("train")

        nvml.phase = "eval"
        model.eval()
        with torch.no_grad():
            schedule = length_schedule(args.eval_batch, args.eval_batches, args.eval_longest, seed=args.seed + 99, worst_at=0)
            for lengths in schedule:
                ids, mask, labels = _batch(lengths, shape.vocab_size, rng, device)
                with torch.autocast(device.type, dtype=half):
                    model(input_ids=ids, attention_mask=mask, labels=labels)
        close_phase("eval")
        stats = torch.cuda.memory_stats() if cuda else {}
        wall_s = time.perf_counter() - started

    result = {
        "batch": batch,
        "accumulation": args.effective_batch // batch,
        "phases": phases,
        "peak_allocated_mib": max(p["max_allocated_mib"] for p in phases.values()),
        "peak_reserved_mib": max(p["max_reserved_mib"] for p in phases.values()),
        "alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "ooms": int(stats.get("num_ooms", 0)),
        "nvml_peak_used_mib": nvml.peak_mib,
        "nvml_phase_peak_mib": nvml.phase_peak,
        "nvml_note": nvml.reason,
        "wall_s": wall_s,
    }
    del model, optimizer, scaler
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return result


def _batch(lengths: list[int], vocab: int, rng: random.Random, device):
    """Right-padded ids, attention mask and labels (-100 on the prompt third and on padding)."""
    import torch

    width = padded(max(lengths))
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, length in enumerate(lengths):
        tokens = torch.tensor([rng.randrange(vocab) for _ in range(length)])
        ids[row, :length] = tokens
        mask[row, :length] = 1
        labels[row, length // 3 : length] = tokens[length // 3 :]
    return ids.to(device), mask.to(device), labels.to(device)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if k != "batch_sizes"}, "runs": []}
    estimates = {batch: estimate_side(args, batch) for batch in args.batch_sizes}
    for batch, est in estimates.items():
        low, high = est["expected_nvidia_smi_mib"]
        print(f"estimate b{batch}: train {est['phases']['train']:,.0f} MiB, eval {est['phases']['eval']:,.0f} MiB, "
              f"peak {est['peak_allocated_mib']:,.0f} MiB, nvidia-smi {low:,.0f}-{high:,.0f} MiB, "
              f"dominant {est['dominant_term']}")
    if args.dry_run:
        report["runs"] = [{"batch": b, "estimate": e} for b, e in estimates.items()]
        print(json.dumps(report["runs"][0]["estimate"]["terms"], indent=2))
        return 0

    import torch
    import transformers

    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("gpu_check: no CUDA device visible; use --dry-run on a CPU machine", file=sys.stderr)
            return 2
        props = torch.cuda.get_device_properties(0)
        report["device"] = {"name": props.name, "total_mib": props.total_memory / MIB, "cuda": torch.version.cuda}
        if args.cap_gib:
            torch.cuda.set_per_process_memory_fraction(min(1.0, args.cap_gib * 1024 / (props.total_memory / MIB)))
    else:
        report["device"] = {"name": args.device}
    report["device"].update({"torch": torch.__version__, "transformers": transformers.__version__})
    for batch in args.batch_sizes:
        measured = run_one(args, batch)
        rows = compare(measured, estimates[batch])
        report["runs"].append({"batch": batch, "measured": measured, "estimate": estimates[batch], "compare": rows})
        print(f"\nmicro-batch {batch} x accumulation {measured['accumulation']}  ({measured['wall_s']:.1f} s, "
              f"allocator retries {measured['alloc_retries']}, OOMs {measured['ooms']})")
        for row in rows:
            if "error" in row:
                print(f"  {row['what']:28s} measured {row['measured_mib']:9,.0f}  estimate {row['estimated_mib']:9,.0f}  "
                      f"error {row['error']:+.1%}")
            else:
                low, high = row["estimated_mib"]
                print(f"  {row['what']:28s} measured {row['measured_mib']:9,.0f}  band {low:,.0f}-{high:,.0f}  "
                      f"{'inside' if row['inside'] else 'OUTSIDE'}")
        print(f"  max reserved {measured['peak_reserved_mib']:,.0f} MiB; NVML {measured['nvml_note'] or 'ok'}")
    path = out_dir(args) / "gpu_check.json"
    path.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
