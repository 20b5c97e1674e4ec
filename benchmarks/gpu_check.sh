#!/usr/bin/env bash
# One command for a GPU machine: replay the course's run and compare with oomdoctor's estimate.
#   bash benchmarks/gpu_check.sh [extra gpu_check.py arguments]
# Needs python3 with torch (CUDA), transformers, peft and pyyaml. Missing packages are installed from
# wheels in .whl/ when that folder is there (no network needed); results go to $OUT or benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch, transformers, peft, yaml" 2>/dev/null; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "gpu_check: python3 lacks torch/transformers/peft/pyyaml and there is no .whl/ folder" >&2
    exit 2
  fi
fi
export PYTHONUNBUFFERED=1
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "${OUT:-benchmarks/results}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" benchmarks/gpu_check.py --out "${OUT:-benchmarks/results}" "$@" 2>&1 | tee "${OUT:-benchmarks/results}/gpu_check.log"
