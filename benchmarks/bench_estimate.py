"""How fast the estimator answers, and how well its activation model matches real HF + PEFT code.

    python benchmarks/bench_estimate.py                 # timings (no torch needed)
    python benchmarks/bench_estimate.py --activations   # + saved-activation check on CPU (torch, transformers, peft)

Timings: a cold ``import oomdoctor.estimate`` in a fresh interpreter, the first estimate (reads the YAML
tables), warm estimates, and the largest-fitting-micro-batch search; also checks torch stays unloaded.

Activations: builds small Qwen3 / Llama models with random weights, runs the decoder stack forward under
``torch.autograd.graph.saved_tensors_hooks`` and adds up the distinct storages autograd keeps (parameters
excluded). The per-layer figure is the difference between a 3-layer and a 2-layer model, so fixed costs
cancel. It is printed next to the estimator's per-layer figure for the same settings. With lora_dropout the
CPU keeps dropout's mask in the input's dtype where CUDA keeps a 1-byte bool: the modelled figure is moved
by that difference so the two compare like with like.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

COURSE_CONFIG = REPO / "configs" / "keywords_clean_train.yaml"


def bench_timings(repeats: int) -> dict[str, float]:
    code = (
        "import time, sys, json; t = time.perf_counter(); import oomdoctor.estimate; "
        "print(json.dumps({'ms': (time.perf_counter() - t) * 1000, 'torch': 'torch' in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    cold = json.loads(out.stdout.strip().splitlines()[-1])

    from oomdoctor.estimate import estimate, largest_fitting_micro_batch
    from oomdoctor.facts.config import read_config
    from oomdoctor.facts.model import model_from_name
    from oomdoctor.facts.types import DataFacts

    config = read_config(COURSE_CONFIG)
    data = DataFacts(source="given", max_tokens=957, eval_max_tokens=604)
    t = time.perf_counter()
    model = model_from_name(config.model_name_or_path)
    assert model is not None
    estimate(config, model, data=data, gpu_total_mib=32510)
    first_ms = (time.perf_counter() - t) * 1000

    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        estimate(config, model, data=data, gpu_total_mib=32510)
        samples.append((time.perf_counter() - t) * 1000)
    search = []
    for _ in range(max(1, repeats // 20)):
        t = time.perf_counter()
        largest_fitting_micro_batch(config, model, data=data, gpu_total_mib=32510)
        search.append((time.perf_counter() - t) * 1000)
    return {
        "cold_import_ms": cold["ms"],
        "torch_imported": cold["torch"],
        "first_estimate_ms": first_ms,
        "warm_estimate_median_ms": statistics.median(samples),
        "warm_estimate_p99_ms": sorted(samples)[int(0.99 * (len(samples) - 1))],
        "fitting_batch_search_median_ms": statistics.median(search),
    }


# ------------------------------------------------------------------------------------------- activations

HIDDEN = 256
ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _hf_config(kind: str, layers: int, attention: str):
    from transformers import LlamaConfig, Qwen3Config

    if kind == "qwen3":
        return Qwen3Config(hidden_size=HIDDEN, intermediate_size=768, num_hidden_layers=layers, num_attention_heads=8,
                           num_key_value_heads=4, head_dim=64, vocab_size=1000, attn_implementation=attention)
    return LlamaConfig(hidden_size=HIDDEN, intermediate_size=688, num_hidden_layers=layers, num_attention_heads=8,
                       num_key_value_heads=8, vocab_size=1000, attn_implementation=attention)


def _saved_bytes(kind: str, layers: int, *, method: str, precision: str, targets: tuple[str, ...], attention: str,
                 batch: int, seq: int, dropout: float = 0.0) -> int:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM, Qwen3ForCausalLM

    torch.manual_seed(0)
    cls = Qwen3ForCausalLM if kind == "qwen3" else LlamaForCausalLM
    model = cls(_hf_config(kind, layers, attention)).to(torch.bfloat16)  # LLaMA-Factory loads 16-bit weights
    if method == "lora":
        model = get_peft_model(model, LoraConfig(r=8, target_modules=list(targets), lora_dropout=dropout))
        for param in model.parameters():
            if param.requires_grad:  # LLaMA-Factory upcasts trainable params unless pure_bf16
                param.data = param.data.to(torch.bfloat16 if precision == "pure_bf16" else torch.float32)
        base = model.get_base_model()
    else:
        base = model
    model.train()  # dropout is only active in training mode
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            seen.setdefault(storage.data_ptr(), storage.nbytes())
        return tensor

    ids = torch.randint(0, 1000, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, -5:] = 0  # padding, as in any SFT batch of more than one sample
    amp = precision in ("fp16", "bf16")
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp)
    embeds = base.model.embed_tokens(ids).detach().requires_grad_(True)
    with autocast, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        base.model(inputs_embeds=embeds, attention_mask=mask)
    return sum(seen.values())


def _adapted_in_features(hf: dict, targets: tuple[str, ...]) -> int:
    """Sum of the input widths of the adapted linears of one decoder layer."""
    hidden = hf["hidden_size"]
    q_dim = hf["num_attention_heads"] * (hf.get("head_dim") or hidden // hf["num_attention_heads"])
    width = {"o_proj": q_dim, "down_proj": hf["intermediate_size"]}
    return sum(width.get(name, hidden) for name in targets)


def bench_activations() -> list[dict[str, object]]:
    from oomdoctor.estimate import estimate
    from oomdoctor.facts.config import config_from_mapping
    from oomdoctor.facts.model import model_from_config_dict

    batch, seq = 2, 64
    settings = [
        ("qwen3", "lora", "fp16", ALL, "sdpa", 0.0),
        ("llama", "lora", "fp16", ALL, "sdpa", 0.0),
        ("llama", "lora", "pure_bf16", ("q_proj", "v_proj"), "sdpa", 0.0),
        ("llama", "lora", "fp32", ("q_proj", "v_proj"), "sdpa", 0.0),
        ("llama", "lora", "fp32", ("q_proj", "v_proj"), "eager", 0.0),
        ("llama", "full", "pure_bf16", ALL, "sdpa", 0.0),
        # lora_dropout above 0: every adapted linear keeps its own dropped-out input and mask
        ("llama", "lora", "pure_bf16", ("q_proj", "v_proj"), "sdpa", 0.05),
        ("llama", "lora", "fp16", ALL, "sdpa", 0.1),
        ("qwen3", "lora", "fp32", ALL, "sdpa", 0.05),
    ]
    rows = []
    for kind, method, precision, targets, attention, dropout in settings:
        shape = {"method": method, "precision": precision, "targets": targets, "attention": attention,
                 "batch": batch, "seq": seq, "dropout": dropout}
        measured = (_saved_bytes(kind, 3, **shape) - _saved_bytes(kind, 2, **shape)) / (batch * seq)
        hf = _hf_config(kind, 2, attention).to_dict()
        model = model_from_config_dict(hf)
        raw = {
            "model_name_or_path": kind, "finetuning_type": method, "lora_target": ",".join(targets),
            "disable_gradient_checkpointing": True, "per_device_train_batch_size": batch, "cutoff_len": seq,
            "flash_attn": "disabled" if attention == "eager" else "sdpa",
        }
        if precision != "fp32":
            raw[precision] = True
        if dropout:
            raw["lora_dropout"] = dropout
        result = estimate(config_from_mapping(raw), model, longest_tokens=seq)
        modelled = result.terms["activations"] * 2**20 / (model.num_layers or 1) / result.tokens_per_micro_batch
        if dropout:
            # CUDA's fused dropout keeps a 1-byte bool mask (what the estimator counts); the CPU fallback
            # keeps the noise tensor in the input's dtype: fp32 when PEFT casts to fp32 adapters, else bf16.
            mask_bytes = 2 if precision == "pure_bf16" else 4
            modelled += (mask_bytes - 1) * _adapted_in_features(hf, targets)
        rows.append({
            "setting": f"{kind} {method} {precision} {'all' if targets == ALL else '+'.join(targets)} {attention}"
            + (f" dropout {dropout}" if dropout else ""),
            "measured_bytes_per_token_layer": round(measured),
            "modelled_bytes_per_token_layer": round(modelled),
            "error": modelled / measured - 1.0,
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--activations", action="store_true", help="also check the activation model on CPU")
    args = parser.parse_args()

    timings = bench_timings(args.repeats)
    print("estimate timings (course config, Qwen3-0.6B):")
    for key, value in timings.items():
        print(f"  {key:32s} {value:.3f}" if isinstance(value, float) else f"  {key:32s} {value}")
    if args.activations:
        print("\nsaved activations per token per decoder layer (hidden 256, batch 2 x 64, CPU):")
        print(f"  {'setting':48s} {'measured':>9s} {'model':>9s} {'error':>7s}")
        for row in bench_activations():
            print(f"  {row['setting']:48s} {row['measured_bytes_per_token_layer']:>9} "
                  f"{row['modelled_bytes_per_token_layer']:>9} {row['error']:+7.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
