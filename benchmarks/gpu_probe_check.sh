#!/usr/bin/env bash
# Issue 9's GPU check, one command for a machine with an NVIDIA GPU (a few minutes on an H200):
#   bash benchmarks/gpu_probe_check.sh
# Probes of the course config at batch 4 and 2 on a random Qwen3-0.6B-shaped model, capped to 32 GiB of the card
# (torch.cuda.set_per_process_memory_fraction, benchmarks/lf_capped.py), NVML sampling, allocated / reserved /
# nvidia-smi peaks next to the estimate before and after calibration, and fit's answer.
# Needs python3 with torch (CUDA), transformers, peft, llamafactory 0.9.5, nvidia-ml-py, psutil, ruamel.yaml and
# pyyaml; results (gpu_probe_check.json and .log) go to $OUT or benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch, transformers, peft, llamafactory, pynvml, psutil, ruamel.yaml, yaml" 2>/dev/null; then
  echo "gpu_probe_check: $PY lacks one of torch/transformers/peft/llamafactory/nvidia-ml-py/psutil/ruamel.yaml" >&2
  exit 2
fi
"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'"
export PYTHONUNBUFFERED=1
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
RESULTS=${OUT:-benchmarks/results}
mkdir -p "$RESULTS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" benchmarks/gpu_probe_check.py --out "$RESULTS" "$@" 2>&1 | tee "$RESULTS/gpu_probe_check.log"
