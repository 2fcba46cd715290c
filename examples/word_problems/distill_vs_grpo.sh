#!/usr/bin/env bash
# On-policy distillation against GRPO at equal wall time, one seed (docs/training.md, "A teacher").
# The teacher is the recipe's SFT'd model: its traces, import and SFT stages (validation cut to one rollout: the
# student runs validate the base model themselves), exported as a whole model folder. Then, from the BASE model,
# the example's config twice, launched together at the same nice level so both see the same load:
#   distill/  algorithm.estimator=distill with that teacher     grpo/  the example's config as it is
# both for the same number of steps, each validating on the same held-out problems before and after.
#   bash examples/word_problems/distill_vs_grpo.sh [SEED] [STEPS] [GRPO_STEPS]      (default: 0, 3, STEPS)
#   extra `alight train` arguments for both student runs: WP_ARGS="--set validation.max_tasks=32"
# Equal wall time: GRPO skips the update of a step whose groups are all zeros, while distillation updates every step
# (and scores with the teacher first), so GRPO's STEPS end far earlier. With GRPO_STEPS > STEPS the grpo run then
# goes on with --resume to GRPO_STEPS steps (its validation at STEPS stays in its metrics.jsonl; its summary.json's
# after is the last one), beside the distillation run still going.
# Both students train with optimizer.micro_batch_tokens=1024 (the config's 4096 took a distillation update to ~10 GB
# resident, and the kernel killed it beside a second run); micro-batching changes memory, not the gradient.
# Everything lands in runs/wp-distill-vs-grpo/: teacher/seed$SEED/ (the recipe's oracle.jsonl and sft/, and policy/,
# the exported teacher) and seed$SEED/ (distill/, grpo/, their logs, and *.time: /usr/bin/time's wall seconds and CPU
# seconds of each run with its children). A teacher already there is reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=examples/word_problems
SEED="${1:-0}"
STEPS="${2:-3}"
GRPO_STEPS="${3:-$STEPS}"
ROOT="${WP_OUT:-runs/wp-distill-vs-grpo}"
case "$ROOT" in /*) ;; *) ROOT="$PWD/$ROOT" ;; esac
OUT="$ROOT/seed$SEED"
TEACHER="$ROOT/teacher/seed$SEED/policy"
read -r -a extra <<< "${WP_ARGS:-}"
mkdir -p "$OUT"
if [ ! -d "$ROOT/teacher/seed$SEED/sft/checkpoints" ]; then
  WP_OUT="$ROOT/teacher" WP_ARGS="--set validation.max_tasks=1 --set validation.samples_per_task=1" \
    bash $HERE/recipe.sh "$SEED" traces import sft
fi
if [ ! -f "$TEACHER/config.json" ]; then
  # What --init-from writes as OUTPUT_DIR/init-policy, without starting a run: the checkpoint as a model folder.
  .venv/bin/python -c 'import sys; from pathlib import Path
from alight_server.trainer.run.init_from import export_policy
export_policy(Path(sys.argv[1]), "smollm2-135m", Path(sys.argv[2]))' "$ROOT/teacher/seed$SEED/sft" "$TEACHER"
fi
student() {  # NAME TIMEFILE STEPS [alight train arguments...]
  local name="$1" timed="$2" steps="$3"; shift 3
  /usr/bin/time -f "wall_s %e user_s %U sys_s %S" -o "$OUT/$timed.time" \
    .venv/bin/alight train $HERE/config.yaml --quiet --seed "$SEED" --steps "$steps" --output-dir "$OUT/$name" \
    --set optimizer.micro_batch_tokens=1024 "$@" "${extra[@]}" >> "$OUT/$name.log" 2>&1
}
grpo() {
  student grpo grpo "$STEPS"
  if [ "$GRPO_STEPS" -gt "$STEPS" ]; then
    echo "== grpo's $STEPS steps ended $(date -u +%H:%M:%S): $(cat "$OUT/grpo.time"); on to $GRPO_STEPS"
    student grpo grpo-resume "$GRPO_STEPS" --resume
  fi
}
echo "== students $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
student distill distill "$STEPS" --set algorithm.estimator=distill --set algorithm.distill.teacher="$TEACHER" & a=$!
grpo & b=$!
status=0
wait $a || status=$?
echo "== distill ended $(date -u +%H:%M:%S) rc $status: $(cat "$OUT/distill.time")"
wait $b || status=$?
echo "== grpo ended $(date -u +%H:%M:%S) rc $status: $(cat "$OUT/grpo.time") $(cat "$OUT/grpo-resume.time" 2>/dev/null)"
exit $status
