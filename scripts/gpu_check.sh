#!/usr/bin/env bash
# The checks that need a CUDA machine (none runs in CI): the embedded trainer's CUDA path and two verl steps.
# Usage: bash scripts/gpu_check.sh [embedded|verl|all]   (default: all; under 10 minutes on one GPU in all)
#        GPU_CHECK_DRY=1 bash scripts/gpu_check.sh ...    (a CPU machine: the same scripts, CPU branches only)
# Nothing is downloaded: the tiny model is built from its seed. Exit 0 only when every check that ran passed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}                # torch with CUDA and transformers (the embedded check)
PY_VERL=${PY_VERL:-.venv-verl/bin/python} # verl and vLLM as well: pip install -e . -e 'server[verl,train]' 'verl[vllm]'
DRY=${GPU_CHECK_DRY:-0}
failed=0

# Each check has its own time limit, so `all` stays under 10 minutes on a GPU machine: 2 x 120 s + 330 s.
# A dry run on a (small, shared) CPU machine gets five times as long.
run() { # NAME SECONDS COMMAND...
  local name=$1 limit=$2 started=$SECONDS
  shift 2
  [ "$DRY" = 1 ] && limit=$((limit * 5))
  echo "== $name (limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - started))s"
  [ "$rc" -eq 0 ] || failed=1
}

# -- embedded backend (trainer/backends/embedded.py, trainer/backends/distributed.py) ---------------------------------------
# bf16, one step on 1 rank and on 2 ranks (NCCL) where the machine has 2 GPUs, DDP then FSDP2; the
# dry run is float32 on CPU with gloo and 2 ranks.
embedded_check() {
  local device=()
  [ "$DRY" = 1 ] && device=(--device cpu)
  for strategy in ddp fsdp; do
    run "embedded $strategy" 120 "$PY" scripts/gpu_embedded_step.py --strategy "$strategy" "${device[@]}"
  done
}

# -- verl backend (trainer/backends/verl/) ---------------------------------------------------------------------------
# Two RL steps through verl: its FSDP actor and a vLLM rollout replica on a local Ray cluster, the replica
# registered as the gateway's upstream (scripts/gpu_verl_steps.py: policy version advanced at the replica,
# greedy outputs changed, trained ids = recorded ids). The dry run goes as far as a CPU allows: config
# translation, Ray, verl's resource pool, and passes when verl's own GPU check refuses with the backend's error.
verl_check() {
  if [ "$DRY" = 1 ]; then
    run "verl (dry: stops at verl's GPU check)" 330 "$PY_VERL" scripts/gpu_verl_steps.py --expect-no-gpu
    return
  fi
  if ! "$PY_VERL" -c "import verl, vllm, torch; assert torch.cuda.is_available(), 'no CUDA device'"; then
    echo "== verl: needs CUDA, verl and vLLM in $PY_VERL (PY_VERL=...; see the top of this script)" >&2
    failed=1
    return
  fi
  run "verl" 330 "$PY_VERL" scripts/gpu_verl_steps.py --gpus "${VERL_GPUS:-1}"
}

case "${1:-all}" in
  embedded) embedded_check ;;
  verl) verl_check ;;
  all) embedded_check; verl_check ;;
  *) echo "usage: bash scripts/gpu_check.sh [embedded|verl|all]" >&2; exit 2 ;;
esac
echo "gpu check: $([ "$failed" = 0 ] && echo OK || echo FAILED)"
exit "$failed"
