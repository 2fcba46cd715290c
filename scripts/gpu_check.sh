#!/usr/bin/env bash
# Checks that need a CUDA machine (none runs in CI or on a CPU machine). One function per backend.
# Usage: bash scripts/gpu_check.sh [embedded|verl|all]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}

# -- embedded backend (trainer/embedded.py, trainer/distributed.py) ---------------------------------------
# The CUDA path once: the tiny model built from a seed (no download), bf16, one step on 1 rank, and on 2
# ranks (NCCL) when the machine has 2 GPUs, with DDP and with FSDP2. Needs torch with CUDA and transformers.
embedded_check() {
  for strategy in ddp fsdp; do
    timeout 600 "$PY" scripts/gpu_embedded_step.py --strategy "$strategy"
  done
}

# -- verl backend (trainer/verl/) ---------------------------------------------------------------------------
# Added with trainer/verl/ (not in this file yet): two steps of a small training through verl.
verl_check() {
  echo "verl check: comes with trainer/verl/"
}

case "${1:-all}" in
  embedded) embedded_check ;;
  verl) verl_check ;;
  all) embedded_check; verl_check ;;
  *) echo "usage: bash scripts/gpu_check.sh [embedded|verl|all]" >&2; exit 2 ;;
esac
