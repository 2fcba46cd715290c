#!/usr/bin/env bash
# The warm-start recipe: supervised fine-tuning on the scripted oracle's conversations (TRAIN problems only),
# then RL (GRPO) from that checkpoint with the example's config. Each stage's validation is the example's:
# held-out problems x 2 samples at the training temperature (0.7), SE clustered by task.
#   bash examples/word_problems/recipe.sh [SEED] [STAGE...]   stages: traces import sft rl (default: all)
#   extra `alight train` arguments for both runs: WP_ARGS="--set validation.max_tasks=16"
# Everything lands in runs/word_problems-recipe/seed$SEED/ (sft/, rl/, oracle.jsonl); each run's summary.json
# holds its before/after and gain +- SE.
set -euo pipefail
cd "$(dirname "$0")/../.."
ALIGHT=.venv/bin/alight
HERE=examples/word_problems
SEED="${1:-0}"; shift || true
OUT="${WP_OUT:-runs/word_problems-recipe}/seed$SEED"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
# One content key for the fine-tuning run's store: the import seals the traces with it, the trainer opens them.
export ALIGHT_SECRET_KEY="${ALIGHT_SECRET_KEY:-word-problems-recipe-local-key}"
read -r -a extra <<< "${WP_ARGS:-}"
mkdir -p "$OUT"
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(traces import sft rl)
for stage in "${stages[@]}"; do
  echo "== $stage $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  case "$stage" in
    traces)  # the oracle through the agent's own loop, on the first 128 train problems
      .venv/bin/python $HERE/oracle_traces.py --count 128 --out "$OUT/oracle.jsonl" ;;
    import)
      mkdir -p "$OUT/sft"
      $ALIGHT data import "$OUT/oracle.jsonl" --format openai --name word_problems.oracle --model smollm2-135m \
        --db "sqlite:///$OUT/sft/alight.db" ;;
    sft)
      $ALIGHT train $HERE/traces/sft.yaml --quiet --seed "$SEED" --output-dir "$OUT/sft" "${extra[@]}" ;;
    rl)  # the example's RL config, at a fifth of its learning rate: one GRPO step at 5e-5 after the warm start
         # sent the policy from 0.5 to 0.0 train reward (it stopped answering and chained calls to 4 turns)
      $ALIGHT train $HERE/config.yaml --quiet --seed "$SEED" --init-from "$OUT/sft" --output-dir "$OUT/rl" \
        --lr 1.0e-5 --steps "${WP_RL_STEPS:-3}" "${extra[@]}" ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
