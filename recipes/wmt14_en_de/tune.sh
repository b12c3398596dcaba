#!/usr/bin/env bash
# Learning rate and warm-up chosen on valid loss, for each system on its own: every point of the grid
# TUNE_LRS x TUNE_WARMUPS trained for TUNE_UPDATES updates with one seed (train.sh), then the valid
# loss of each point at that budget read from its log (fairseq-rope-tune grid). Nothing here looks at
# the test set. Writes
#   $OUT_DIR/${NAME}_tuning.md   every point's valid loss, the chosen point per system marked
#   $OUT_DIR/${NAME}_tuning.env  LR_<system>=.. and WARMUP_UPDATES_<system>=.. for run.sh: the
#                                settings chosen, which the comparison reads from
#   $WORK_DIR/tune/chosen.env    (a copy), or from a published one given as CHOSEN (tuning skipped)
# Knobs:
#   WORK_DIR      work/debian; DATA_BIN $WORK_DIR/data-bin (prepare.sh; run it first, or the
#                 comparison script, which prepares the data)
#   ARCHS         "transformer rpe_transformer rope_transformer" (ARCH or NAME=ARCH, as run.sh)
#   TUNE_LRS      "1e-3 2e-3 4e-3 8e-3"; TUNE_WARMUPS "250 1000" (updates); TUNE_SEED 1
#   TUNE_UPDATES  2000 updates of TOKENS_PER_UPDATE target tokens (the same budget for every point)
#   PARALLEL_RUNS 2 runs at once, THREADS_PER_RUN 1 thread each
#   OUT_DIR       $WORK_DIR (OUT_DIR=docs writes the committed table); NAME debian
#   HEADS         2 attention heads of 64 channels (the paper's head size) in the comparison's model:
#                 2+2 layers, dimension 128, FFN 512; HEADS=4 tunes its 4-head study (32 channels a head)
#   MODEL_ARGS    that model's fairseq-train flags; given, they replace it (and HEADS is unused)
# and train.sh's knobs, the same for every point. Each point is resumable
# (train.sh continues from its last checkpoint) and skipped once trained.
set -euo pipefail
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/debian}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCHS=${ARCHS:-transformer rpe_transformer rope_transformer}
TUNE_LRS=${TUNE_LRS:-1e-3 2e-3 4e-3 8e-3}
TUNE_WARMUPS=${TUNE_WARMUPS:-250 1000}
TUNE_SEED=${TUNE_SEED:-1}
TUNE_UPDATES=${TUNE_UPDATES:-2000}
PARALLEL_RUNS=${PARALLEL_RUNS:-2}
THREADS_PER_RUN=${THREADS_PER_RUN:-1}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
NAME=${NAME:-debian}
DATA_BIN=${DATA_BIN:-$WORK_DIR/data-bin}
HEADS=${HEADS:-2}
need_heads "$HEADS"
MODEL_ARGS=${MODEL_ARGS:-$(small_model "$HEADS")}
export EXTRA_TRAIN_ARGS="$MODEL_ARGS${EXTRA_TRAIN_ARGS:+ $EXTRA_TRAIN_ARGS}"
export TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-2000}
export MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-2000}
export SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-100}
export KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-1}
export LOG_INTERVAL=${LOG_INTERVAL:-50}
for v in TUNE_LRS TUNE_WARMUPS; do
  [ -n "${!v// /}" ] || die "$v is empty: give at least one value"
done
for lr in $TUNE_LRS; do need_num TUNE_LRS "$lr"; done
for wu in $TUNE_WARMUPS; do need_int TUNE_WARMUPS "$wu" 1; done
need_int TUNE_SEED "$TUNE_SEED"
need_int TUNE_UPDATES "$TUNE_UPDATES" 1
need_int PARALLEL_RUNS "$PARALLEL_RUNS" 1
need_int THREADS_PER_RUN "$THREADS_PER_RUN" 1
[[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ ]] || die "NAME must be a file name (letters, digits, _ . -), got '$NAME'"
need_file "$DATA_BIN/dict.$SRC.txt" "binarized data (run prepare.sh first; DATA_BIN)"
need_cmd fairseq-rope-tune "$ROPE_HINT"

for entry in $ARCHS; do need_run_name "$entry"; done
points=()  # SYSTEM ARCH LR WARMUP; the systems interleaved, so that a part of the grid has points of each
for lr in $TUNE_LRS; do for wu in $TUNE_WARMUPS; do for entry in $ARCHS; do
  points+=("${entry%%=*} ${entry#*=} $lr $wu")
done; done; done
log "tuning ${#points[@]} points (${ARCHS// /, } x lr {$TUNE_LRS} x warm-up {$TUNE_WARMUPS}), $TUNE_UPDATES updates each, seed $TUNE_SEED, $PARALLEL_RUNS at a time"

point_dir() { echo "$WORK_DIR/tune/checkpoints/${1}_lr${3}_wu${4}"; }
train_point() {  # train_point SYSTEM ARCH LR WARMUP
  env ARCH="$2" RUN_NAME="${1}_lr${3}_wu${4}" SAVE_DIR="$(point_dir "$@")" DATA_BIN="$DATA_BIN" \
      LR="$3" WARMUP_UPDATES="$4" SEED="$TUNE_SEED" MAX_UPDATE="$TUNE_UPDATES" \
      OMP_NUM_THREADS="$THREADS_PER_RUN" MKL_NUM_THREADS="$THREADS_PER_RUN" bash "$RECIPE_DIR/train.sh"
}
names=()
declare -A point_of=()  # point name (SYSTEM_lrLR_wuWARMUP): "SYSTEM ARCH LR WARMUP"
for point in "${points[@]}"; do
  # shellcheck disable=SC2086
  set -- $point
  names+=("${1}_lr${3}_wu${4}") && point_of[${1}_lr${3}_wu${4}]=$point
done
# shellcheck disable=SC2086
train_named() { train_point ${point_of[$1]}; }
in_parallel "$PARALLEL_RUNS" train_named "$WORK_DIR/tune/checkpoints/<point>/train.log" "${names[@]}"

runs=()
for point in "${points[@]}"; do
  # shellcheck disable=SC2086
  set -- $point
  runs+=("$1=$(point_dir "$@")")
done
mkdir -p "$OUT_DIR"
fairseq-rope-tune grid "${runs[@]}" --updates "$TUNE_UPDATES" \
  --out-md "$OUT_DIR/${NAME}_tuning.md" --out-env "$OUT_DIR/${NAME}_tuning.env"
cp "$OUT_DIR/${NAME}_tuning.env" "$WORK_DIR/tune/chosen.env.tmp" && mv -f "$WORK_DIR/tune/chosen.env.tmp" "$WORK_DIR/tune/chosen.env"
log "tuning table: $OUT_DIR/${NAME}_tuning.md; chosen settings: $OUT_DIR/${NAME}_tuning.env (and $WORK_DIR/tune/chosen.env)"
