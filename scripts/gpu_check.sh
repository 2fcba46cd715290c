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
# Two RL steps through verl on one CUDA GPU: verl's FSDP actor and a vLLM rollout replica on a local Ray
# cluster, the replica registered as the gateway's upstream; the tiny model is built from its seed. Asserts
# the policy version advanced at the replica, the greedy outputs changed, and the trained ids are the
# recorded ones (scripts/gpu_verl_steps.py). Needs a venv with verl and vLLM:
#   python -m venv .venv-verl-gpu && .venv-verl-gpu/bin/pip install -e . -e 'server[verl,train]' 'verl[vllm]'
# then: PY_VERL=.venv-verl-gpu/bin/python bash scripts/gpu_check.sh verl
verl_check() {
  local py=${PY_VERL:-.venv-verl-gpu/bin/python}
  "$py" -c "import verl, vllm, torch; assert torch.cuda.is_available(), 'no CUDA device'" \
    || { echo "verl check: needs CUDA, verl and vLLM in $py (see the comment above verl_check)" >&2; return 1; }
  timeout 900 "$py" scripts/gpu_verl_steps.py --gpus "${VERL_GPUS:-1}"
}

case "${1:-all}" in
  embedded) embedded_check ;;
  verl) verl_check ;;
  all) embedded_check; verl_check ;;
  *) echo "usage: bash scripts/gpu_check.sh [embedded|verl|all]" >&2; exit 2 ;;
esac
