#!/usr/bin/env bash
# The budget at which every system has stopped improving: the first seed of each system trained (with
# its tuned settings, $WORK_DIR/tune/chosen.env from tune.sh) to CONVERGE_START updates, then
# CONVERGE_STEP more at a time, until the valid loss of every one is flat by fairseq-rope-tune flat's
# criterion (less than FLAT_DROP lower over the last FLAT_LAST of the updates). A run extended is the
# same run continued (inverse square root decay does not depend on the budget). Writes
# $WORK_DIR/tune/budget.env (MAX_UPDATE=N) and $OUT_DIR/${NAME}_convergence.md (each round's check).
# The runs are run.sh's first seed (checkpoints/NAME_seedS), so the comparison does not train them again.
# Knobs:
#   WORK_DIR        work/debian; ARCHS as tune.sh's; FIRST_SEED 1
#   CONVERGE_START  4000, CONVERGE_STEP 2000, CONVERGE_MAX 30000 (updates; past it: an error)
#   FLAT_LAST       0.2, FLAT_DROP 0.01
#   PARALLEL_RUNS   2 at a time, THREADS_PER_RUN 1; OUT_DIR $WORK_DIR; NAME debian
#   MODEL_ARGS      tune.sh's (2+2 layers, dimension 128, 2 heads), added to EXTRA_TRAIN_ARGS as sample.sh does
#   TOKENS_PER_UPDATE 2000, SAVE_INTERVAL_UPDATES 200, KEEP_INTERVAL_UPDATES 5 (the comparison's)
# and train.sh's other knobs.
set -euo pipefail
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/debian}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCHS=${ARCHS:-transformer rpe_transformer rope_transformer}
FIRST_SEED=${FIRST_SEED:-1}
CONVERGE_START=${CONVERGE_START:-4000}
CONVERGE_STEP=${CONVERGE_STEP:-2000}
CONVERGE_MAX=${CONVERGE_MAX:-30000}
FLAT_LAST=${FLAT_LAST:-0.2}
FLAT_DROP=${FLAT_DROP:-0.01}
PARALLEL_RUNS=${PARALLEL_RUNS:-2}
THREADS_PER_RUN=${THREADS_PER_RUN:-1}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
NAME=${NAME:-debian}
CHOSEN=${CHOSEN:-$WORK_DIR/tune/chosen.env}
MODEL_ARGS=${MODEL_ARGS:-$(small_model 2)}
export EXTRA_TRAIN_ARGS="$MODEL_ARGS${EXTRA_TRAIN_ARGS:+ $EXTRA_TRAIN_ARGS}"
export TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-2000} MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-2000}
export SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-200} KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-5}
for v in CONVERGE_START CONVERGE_STEP CONVERGE_MAX PARALLEL_RUNS THREADS_PER_RUN; do need_int "$v" "${!v}" 1; done
need_int FIRST_SEED "$FIRST_SEED"
need_num FLAT_LAST "$FLAT_LAST"; need_num FLAT_DROP "$FLAT_DROP"
need_file "$CHOSEN" "the tuned settings (tune.sh writes them; CHOSEN)"
need_cmd fairseq-rope-tune "$ROPE_HINT"
# shellcheck disable=SC1090
. "$CHOSEN"
budget_file=$WORK_DIR/tune/budget.env
if [ -f "$budget_file" ]; then
  log "budget already found: $(cat "$budget_file") ($budget_file; remove it to search again)"
  exit 0
fi

names=() arch_of=()
for entry in $ARCHS; do names+=("${entry%%=*}"); arch_of+=("${entry#*=}"); done
train_to() {  # train_to INDEX UPDATES: the first seed of system INDEX trained (or continued) to UPDATES
  local name=${names[$1]} own_lr="LR_${names[$1]}" own_warmup="WARMUP_UPDATES_${names[$1]}" own_args="ARGS_${names[$1]}"
  [ -n "${!own_lr:-}" ] && [ -n "${!own_warmup:-}" ] || die "$CHOSEN has no $own_lr or $own_warmup (tune.sh with ARCHS=\"$ARCHS\")"
  env ARCH="${arch_of[$1]}" RUN_NAME="${name}_seed$FIRST_SEED" SEED="$FIRST_SEED" MAX_UPDATE="$2" \
      LR="${!own_lr}" WARMUP_UPDATES="${!own_warmup}" ALLOW_CHANGED_SETTINGS=1 \
      EXTRA_TRAIN_ARGS="${EXTRA_TRAIN_ARGS:-}${!own_args:+${EXTRA_TRAIN_ARGS:+ }${!own_args}}" \
      OMP_NUM_THREADS="$THREADS_PER_RUN" MKL_NUM_THREADS="$THREADS_PER_RUN" bash "$RECIPE_DIR/train.sh"
}
mkdir -p "$OUT_DIR" "$WORK_DIR/tune"
report=$WORK_DIR/tune/convergence.md
[ -f "$report.tmp" ] || echo "Flat: valid nll_loss less than $FLAT_DROP lower (relative) over the last $FLAT_LAST of the updates (fairseq-rope-tune flat)." > "$report.tmp"
budget=$CONVERGE_START
for name in "${names[@]}"; do  # an interrupted search continues at the budget its runs reached
  reached=$(sed -n 's/^MAX_UPDATE=//p' "$WORK_DIR/checkpoints/${name}_seed$FIRST_SEED/.done" 2>/dev/null || true)
  [ -z "$reached" ] || [ "$reached" -le "$budget" ] || budget=$reached
done
while :; do
  log "training the first seed of ${names[*]} to $budget updates"
  pids=()
  for i in "${!names[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL_RUNS" ]; do sleep 1; done
    ( train_to "$i" "$budget" 2>&1 | sed -u "s/^/{${names[$i]}_seed$FIRST_SEED} /" ) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || die "a run failed (see the {run}-prefixed lines above)"; done
  runs=()
  for name in "${names[@]}"; do runs+=("$name=$WORK_DIR/checkpoints/${name}_seed$FIRST_SEED"); done
  { echo; echo "At $budget updates:"; echo; } >> "$report.tmp"
  check=$(fairseq-rope-tune flat "${runs[@]}" --last "$FLAT_LAST" --drop "$FLAT_DROP") && status=0 || status=$?
  printf '%s\n' "$check" | sed 's/^/- /' | tee -a "$report.tmp" >&2
  if [ "$status" -eq 0 ]; then break; fi
  [ "$status" -eq 3 ] || die "fairseq-rope-tune flat failed (exit status $status)"
  budget=$((budget + CONVERGE_STEP))
  [ "$budget" -le "$CONVERGE_MAX" ] || die "not flat by CONVERGE_MAX=$CONVERGE_MAX updates (see $report.tmp); raise it"
done
mv -f "$report.tmp" "$report"
cp "$report" "$OUT_DIR/${NAME}_convergence.md.tmp" && mv -f "$OUT_DIR/${NAME}_convergence.md.tmp" "$OUT_DIR/${NAME}_convergence.md"
echo "MAX_UPDATE=$budget" > "$budget_file.tmp" && mv -f "$budget_file.tmp" "$budget_file"
log "every system flat at $budget updates: $budget_file; the check of each round: $OUT_DIR/${NAME}_convergence.md"
