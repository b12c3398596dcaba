#!/usr/bin/env bash
# The budget at which every system has stopped improving: the first seed of each system trained (with
# its tuned settings, $WORK_DIR/tune/chosen.env from tune.sh) to CONVERGE_START updates, then
# CONVERGE_STEP more at a time, until the valid loss of every one is flat at the same budget, by fairseq-rope-tune flat's
# criterion (less than FLAT_DROP lower over the last FLAT_LAST of the updates; with FLAT_MEAN_OF K, each end of
# the window the mean of the K validations up to it, which one validation's noise moves less). A run extended is the
# same run continued (inverse square root decay does not depend on the budget). Writes
# $WORK_DIR/tune/budget.env (MAX_UPDATE=N), published as $OUT_DIR/${NAME}_budget.env beside tune.sh's
# ${NAME}_tuning.env, and $OUT_DIR/${NAME}_convergence.md (every check). Each
# system goes on by itself until it is flat (a slot freed early goes to another), then every system is
# taken to the largest of those budgets, until one budget is flat for all of them. Not flat by
# CONVERGE_MAX: the report also gets, for each run, the budget at which a power law fitted to its valid loss
# (from a quarter and from half of its updates on) would be flat (fairseq-rope-tune extrapolate), before the error.
# The runs are run.sh's first seed (checkpoints/NAME_seedS), so the comparison does not train them again.
# Stopped and run again, each run goes on from its last checkpoint to the next budget of the grid.
# Knobs:
#   WORK_DIR        work/debian; ARCHS as tune.sh's; FIRST_SEED 1
#   CONVERGE_START  4000, CONVERGE_STEP 2000, CONVERGE_MAX 30000 (updates; past it: an error)
#   FLAT_LAST       0.2, FLAT_DROP 0.01, FLAT_MEAN_OF 1 (a single validation at each end; K needs K validations
#                   after the window's start at CONVERGE_START: K <= FLAT_LAST x CONVERGE_START / validation interval)
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
FLAT_MEAN_OF=${FLAT_MEAN_OF:-1}
PARALLEL_RUNS=${PARALLEL_RUNS:-2}
THREADS_PER_RUN=${THREADS_PER_RUN:-1}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
NAME=${NAME:-debian}
CHOSEN=${CHOSEN:-$WORK_DIR/tune/chosen.env}
MODEL_ARGS=${MODEL_ARGS:-$(small_model 2)}
export EXTRA_TRAIN_ARGS="$MODEL_ARGS${EXTRA_TRAIN_ARGS:+ $EXTRA_TRAIN_ARGS}"
export TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-2000} MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-2000}
export SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-200} KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-5}
for v in CONVERGE_START CONVERGE_STEP CONVERGE_MAX PARALLEL_RUNS THREADS_PER_RUN FLAT_MEAN_OF; do need_int "$v" "${!v}" 1; done
need_int FIRST_SEED "$FIRST_SEED"
need_num FLAT_LAST "$FLAT_LAST"; need_num FLAT_DROP "$FLAT_DROP"
need_file "$CHOSEN" "the tuned settings (tune.sh writes them; CHOSEN)"
need_cmd fairseq-rope-tune "$ROPE_HINT"
need_cmd fairseq-rope-checkpoint "$ROPE_HINT"
# shellcheck disable=SC1090
. "$CHOSEN"
budget_file=$WORK_DIR/tune/budget.env
if [ -f "$budget_file" ]; then
  log "budget already found: $(cat "$budget_file") ($budget_file; remove it to search again)"
  exit 0
fi

names=()
declare -A arch_of=()
for entry in $ARCHS; do names+=("${entry%%=*}"); arch_of[${entry%%=*}]=${entry#*=}; done
train_to() {  # train_to SYSTEM UPDATES: the first seed of SYSTEM trained (or continued) to UPDATES
  local name=$1 own_lr="LR_$1" own_warmup="WARMUP_UPDATES_$1" own_args="ARGS_$1"
  [ -n "${!own_lr:-}" ] && [ -n "${!own_warmup:-}" ] || die "$CHOSEN has no $own_lr or $own_warmup (tune.sh with ARCHS=\"$ARCHS\")"
  env ARCH="${arch_of[$name]}" RUN_NAME="${name}_seed$FIRST_SEED" SEED="$FIRST_SEED" MAX_UPDATE="$2" \
      LR="${!own_lr}" WARMUP_UPDATES="${!own_warmup}" ALLOW_CHANGED_SETTINGS=1 \
      EXTRA_TRAIN_ARGS="${EXTRA_TRAIN_ARGS:-}${!own_args:+${EXTRA_TRAIN_ARGS:+ }${!own_args}}" \
      OMP_NUM_THREADS="$THREADS_PER_RUN" MKL_NUM_THREADS="$THREADS_PER_RUN" bash "$RECIPE_DIR/train.sh"
}
mkdir -p "$OUT_DIR" "$WORK_DIR/tune"
report=$WORK_DIR/tune/convergence.md
means=""
[ "$FLAT_MEAN_OF" -eq 1 ] || means=", each end of the window the mean of the $FLAT_MEAN_OF validations up to it"
header="Flat: valid nll_loss less than $FLAT_DROP lower (relative) over the last $FLAT_LAST of the updates$means (fairseq-rope-tune flat). Each system is checked on its own, from the budget it has reached, CONVERGE_STEP more at a time."
[ -f "$report.tmp" ] || echo "$header" > "$report.tmp"
# a search resumed with another criterion would mix two criteria in one report
[ "$(head -n 1 "$report.tmp")" = "$header" ] || die "$report.tmp was begun with another criterion ($(head -n 1 "$report.tmp")): \
run with that search's FLAT_LAST, FLAT_DROP and FLAT_MEAN_OF, or move the report away to search with FLAT_LAST=$FLAT_LAST \
FLAT_DROP=$FLAT_DROP FLAT_MEAN_OF=$FLAT_MEAN_OF"
flat_dir=$WORK_DIR/tune/flat
# converge_one SYSTEM: trained from $floor (or the budget it reached, if more) CONVERGE_STEP more at a time
# until its valid loss is flat; that budget in $flat_dir/SYSTEM ("none": not flat by CONVERGE_MAX)
converge_one() {
  local name=$1 dir="$WORK_DIR/checkpoints/${1}_seed$FIRST_SEED" budget=$floor reached held check status line
  # the updates the run holds: those of its last training (.done), else of checkpoint_last.pt (a search
  # stopped between two budgets); from there on at the grid's next budget
  reached=$(sed -n 's/^MAX_UPDATE=//p' "$dir/.done" 2>/dev/null || true)
  if [ -z "$reached" ] && [ -d "$dir" ]; then
    held=$(fairseq-rope-checkpoint resume "$dir") || die "cannot read $dir/checkpoint_last.pt (see above)"
    reached=$(json_field updates <<< "$held")
  fi
  while [ "$budget" -lt "${reached:-0}" ]; do budget=$((budget + CONVERGE_STEP)); done
  [ "$budget" -le "$CONVERGE_MAX" ] || die "$dir holds ${reached:-0} updates: the grid's next budget, $budget, is past CONVERGE_MAX=$CONVERGE_MAX"
  while [ "$budget" -le "$CONVERGE_MAX" ]; do
    train_to "$name" "$budget"
    check=$(fairseq-rope-tune flat "$name=$dir" --last "$FLAT_LAST" --drop "$FLAT_DROP" --mean-of "$FLAT_MEAN_OF") \
      && status=0 || status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || die "fairseq-rope-tune flat failed (exit status $status)"
    # (a system already flat at the next round's budget is checked there again: its line is written once)
    line="- at $budget updates: $check"
    grep -qxF -- "$line" "$report.tmp" || printf '%s\n' "$line" >> "$report.tmp"
    log "$check"
    if [ "$status" -eq 0 ]; then echo "$budget" > "$flat_dir/$name"; return 0; fi
    budget=$((budget + CONVERGE_STEP))
  done
  echo none > "$flat_dir/$name"
}
# Every system on its own until it is flat (so that a run finished early frees its slot for another), then
# every system at the largest of those budgets, until one budget is flat for all: the first budget on the
# grid CONVERGE_START + k CONVERGE_STEP at which every system's valid loss is flat.
floor=$CONVERGE_START
while :; do
  rm -rf "$flat_dir" && mkdir -p "$flat_dir"
  log "every system (the first seed of ${names[*]}) from $floor updates on, until its valid loss is flat"
  in_parallel "$PARALLEL_RUNS" converge_one "" "${names[@]}"
  budgets=()
  for name in "${names[@]}"; do budgets+=("$(cat "$flat_dir/$name")"); done
  if [[ " ${budgets[*]} " == *" none "* ]]; then
    # where each run is heading: the budget at which a power law fitted to its valid loss would be flat
    for name in "${names[@]}"; do
      projection=$(fairseq-rope-tune extrapolate "$name=$WORK_DIR/checkpoints/${name}_seed$FIRST_SEED" \
        --last "$FLAT_LAST" --drop "$FLAT_DROP" 2>&1) || true  # (3: a fit without projection, 1: an error; each says why)
      while IFS= read -r line; do
        [ -n "$line" ] || continue
        line="- projected: $line"
        grep -qxF -- "$line" "$report.tmp" || printf '%s\n' "$line" >> "$report.tmp"
        log "$line"
      done <<< "$projection"
    done
    die "not flat by CONVERGE_MAX=$CONVERGE_MAX updates: ${names[*]} reached ${budgets[*]} (see $report.tmp); raise it"
  fi
  budget=$(printf '%s\n' "${budgets[@]}" | sort -n | tail -n 1)
  [ "$(printf '%s\n' "${budgets[@]}" | sort -u | wc -l)" -gt 1 ] || break
  floor=$budget
done
rm -rf "$flat_dir"
mv -f "$report.tmp" "$report"
cp "$report" "$OUT_DIR/${NAME}_convergence.md.tmp" && mv -f "$OUT_DIR/${NAME}_convergence.md.tmp" "$OUT_DIR/${NAME}_convergence.md"
echo "MAX_UPDATE=$budget" > "$OUT_DIR/${NAME}_budget.env.tmp" && mv -f "$OUT_DIR/${NAME}_budget.env.tmp" "$OUT_DIR/${NAME}_budget.env"
echo "MAX_UPDATE=$budget" > "$budget_file.tmp" && mv -f "$budget_file.tmp" "$budget_file"
log "every system flat at $budget updates: $budget_file ($OUT_DIR/${NAME}_budget.env); the check of each round: $OUT_DIR/${NAME}_convergence.md"
