#!/usr/bin/env bash
# Step 3: averages the last AVERAGE_LAST update checkpoints of a run (RoFormer 4.1: "the last 5").
#   RUN_NAME / ARCH        which run (default: rope_transformer_wmt_en_de); SAVE_DIR=$WORK_DIR/checkpoints/$RUN_NAME
#   AVERAGE_LAST           5
#   CHECKPOINT_UPPER_BOUND ignore checkpoints after this update (default: none)
#   AVG_CHECKPOINT         output (default: $SAVE_DIR/checkpoint_avg_last$AVERAGE_LAST.pt)
# Skipped when the output is newer than every checkpoint_<epoch>_<update>.pt of the run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCH=${ARCH:-rope_transformer_wmt_en_de}
RUN_NAME=${RUN_NAME:-$ARCH}
SAVE_DIR=${SAVE_DIR:-$WORK_DIR/checkpoints/$RUN_NAME}
AVERAGE_LAST=${AVERAGE_LAST:-5}
CHECKPOINT_UPPER_BOUND=${CHECKPOINT_UPPER_BOUND:-}
AVG_CHECKPOINT=${AVG_CHECKPOINT:-$SAVE_DIR/checkpoint_avg_last$AVERAGE_LAST.pt}
need_int AVERAGE_LAST "$AVERAGE_LAST" 1
[ -z "$CHECKPOINT_UPPER_BOUND" ] || need_int CHECKPOINT_UPPER_BOUND "$CHECKPOINT_UPPER_BOUND" 1
need_cmd fairseq-rope-average "$ROPE_HINT"
[ -d "$SAVE_DIR" ] || die "no checkpoint directory $SAVE_DIR (train $RUN_NAME first, or set SAVE_DIR)"

if [ -f "$AVG_CHECKPOINT" ] && [ -z "$(find "$SAVE_DIR" -maxdepth 1 -name 'checkpoint_*_*.pt' -newer "$AVG_CHECKPOINT")" ]; then
  log "up to date: $AVG_CHECKPOINT"
  exit 0
fi
log "averaging the last $AVERAGE_LAST update checkpoints of $SAVE_DIR -> $AVG_CHECKPOINT"
fairseq-rope-average --inputs "$SAVE_DIR" --num-update-checkpoints "$AVERAGE_LAST" \
  ${CHECKPOINT_UPPER_BOUND:+--checkpoint-upper-bound "$CHECKPOINT_UPPER_BOUND"} --output "$AVG_CHECKPOINT"
