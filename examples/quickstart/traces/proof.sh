#!/usr/bin/env bash
# The proof of docs/traces.md: traces of the quickstart agent from a stronger policy (the base model at
# temperature 0.3, 128 train tasks), exported as OpenTelemetry spans with text only, imported, checked,
# fine-tuned on (the traces scored 1), then RL from that checkpoint. Everything lands in runs/traces-proof/.
#   bash examples/quickstart/traces/proof.sh [STAGE...]   stages: generate export import check compare sft rl
#   (default: all)
set -euo pipefail
cd "$(dirname "$0")/../../.."
ALIGHT=.venv/bin/alight
OUT=runs/traces-proof
HERE=examples/quickstart/traces
# One content key for the store of every stage (the eval run's, the fine-tuning run's): both sides open it.
export ALIGHT_SECRET_KEY="${ALIGHT_SECRET_KEY:-traces-proof-local-key}"
mkdir -p "$OUT"
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(generate export import check compare sft rl)
for stage in "${stages[@]}"; do
  echo "== $stage $(date -u +%H:%M:%S)"
  case "$stage" in
    generate)  # the base policy at temperature 0.3 on 128 training tasks, one sample each
      $ALIGHT eval examples/quickstart/config.yaml --set dataset.val=tasks_train.jsonl \
        --set validation.max_tasks=128 --set validation.samples_per_task=1 --set inference.val_temperature=0.3 \
        --set output_dir="$PWD/$OUT/generate" --out "$OUT/generate.json" ;;
    export)
      .venv/bin/python $HERE/export_otel.py --db "sqlite:///$OUT/generate/alight.db" --out "$OUT/quickstart-traces.pb" --mode val ;;
    import)
      mkdir -p "$OUT/sft"
      $ALIGHT data import "$OUT/quickstart-traces.pb" --format otel --name quickstart.traces --model smollm2-135m \
        --db "sqlite:///$OUT/sft/alight.db" ;;
    check)
      $ALIGHT data check quickstart.traces --config $HERE/sft.yaml --db "sqlite:///$OUT/sft/alight.db" | tail -n 8 ;;
    compare)  # the rendered ids against the ids the gateway recorded when the traces were generated
      .venv/bin/python $HERE/compare_ids.py --recorded "sqlite:///$OUT/generate/alight.db" \
        --imported "sqlite:///$OUT/sft/alight.db" --name quickstart.traces ;;
    sft)
      $ALIGHT train $HERE/sft.yaml --quiet ;;
    rl)  # the quickstart's RL from the fine-tuned checkpoint; 2 steps, 32 validation tasks x 2 to fit the time here
      $ALIGHT train examples/quickstart/config.yaml --init-from "$OUT/sft" --output-dir "$OUT/rl" --steps 2 \
        --set validation.max_tasks=32 --quiet ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
