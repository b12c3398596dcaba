#!/usr/bin/env bash
# Figures of the offline sample run (sample.sh, which this runs first: finished stages are skipped):
#   $OUT_DIR/sample_curves.png     train loss, valid loss (and valid BLEU if logged) against updates,
#                                  RoPE and baseline on one chart (fairseq-rope-plot-training)
#   $OUT_DIR/sample_by_length.png  sacreBLEU and chrF by source length, RoPE vs baseline, on the
#   $OUT_DIR/sample_by_length.md   sample's test set, with paired bootstrap p-values (fairseq-rope-compare)
# Knobs:
#   OUT_DIR   default: $WORK_DIR (work/sample); OUT_DIR=docs regenerates the committed docs/ figures
#   BUCKETS   10,20,30 (source words: 1-10, 11-20, 21-30, 31+)
#   ARCHS     "transformer rope_transformer" (the first is the baseline of the comparison)
# and every knob of sample.sh.
set -euo pipefail
WORK_DIR_SET=${WORK_DIR:-}  # before common.sh, which gives WORK_DIR the full recipe's default
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export WORK_DIR=${WORK_DIR_SET:-$REPO_ROOT/work/sample}
export RAW_DIR=${RAW_DIR:-$RECIPE_DIR/sample}
export ARCHS=${ARCHS:-transformer rope_transformer}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
BUCKETS=${BUCKETS:-10,20,30}
[[ "$BUCKETS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "BUCKETS must look like 10,20,30 (source words), got '$BUCKETS'"

need_cmd fairseq-rope-plot-training "$ROPE_HINT"; need_cmd fairseq-rope-compare "$ROPE_HINT"
bash "$RECIPE_DIR/sample.sh"

mkdir -p "$OUT_DIR"
cd "$REPO_ROOT"  # paths in the table relative to the repository
logs=(); results=()
for arch in $ARCHS; do
  logs+=("$arch=$WORK_DIR/checkpoints/$arch/train.log")
  results+=(--result "$arch=$WORK_DIR/eval/$arch/result.json")
done
fairseq-rope-plot-training "${logs[@]}" --out "$OUT_DIR/sample_curves.png" \
  --title "Offline sample: training curves (sample.sh)"
first_arch=${ARCHS%% *}
max_update=$(sed -n 's/^MAX_UPDATE=//p' "$WORK_DIR/checkpoints/$first_arch/.done")
fairseq-rope-compare --src "$RAW_DIR/test.$SRC" "${results[@]}" --buckets "$BUCKETS" \
  --note "Models: sample.sh's, $max_update updates, identical settings for every arch; checkpoints: average of the last ${AVERAGE_LAST:-5}." \
  --title "Offline sample: quality by source length (sample.sh)" \
  --out-md "$OUT_DIR/sample_by_length.md" --out-png "$OUT_DIR/sample_by_length.png"
log "figures in $OUT_DIR: sample_curves.png, sample_by_length.png (+ sample_by_length.md)"
