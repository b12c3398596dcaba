#!/usr/bin/env bash
# Figures of the offline sample run (sample.sh, which this runs first: finished stages are skipped):
#   $OUT_DIR/${NAME}_curves.png     train loss, valid loss (and valid BLEU if logged) against updates,
#                                   every run on one chart (fairseq-rope-plot-training)
#   $OUT_DIR/${NAME}_by_length.png  sacreBLEU and chrF by source length on the sample's test set, with
#   $OUT_DIR/${NAME}_by_length.md   paired bootstrap p-values against the first run (fairseq-rope-compare)
# Knobs:
#   OUT_DIR   default: $WORK_DIR (work/sample); OUT_DIR=docs regenerates the committed docs/ figures
#   BUCKETS   10,20,30 (source words: 1-10, 11-20, 21-30, 31+)
#   ARCHS     "transformer rope_transformer": the runs, as run.sh takes them (ARCH or NAME=ARCH, with
#             ARGS_<name>); the first is the baseline of the comparison
#   SEEDS     training seeds (run.sh's knob): with several, the table and the by-length figure give each
#             run's mean ± standard deviation over its seeds (error bars) and the test over seeds and
#             sentences; the training curves are those of the first seed
#   NAME      sample (the figures' file names and title)
#   TITLE     "Offline sample"
# and every knob of sample.sh.
set -euo pipefail
WORK_DIR_SET=${WORK_DIR:-}  # before common.sh, which gives WORK_DIR the full recipe's default
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export WORK_DIR=${WORK_DIR_SET:-$REPO_ROOT/work/sample}
export RAW_DIR=${RAW_DIR:-$RECIPE_DIR/sample}
export ARCHS=${ARCHS:-transformer rope_transformer}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
NAME=${NAME:-sample}
TITLE=${TITLE:-Offline sample}
[[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ ]] || die "NAME must be a file name (letters, digits, _ . -), got '$NAME'"
BUCKETS=${BUCKETS:-10,20,30}
[[ "$BUCKETS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "BUCKETS must look like 10,20,30 (source words), got '$BUCKETS'"

need_cmd fairseq-rope-plot-training "$ROPE_HINT"; need_cmd fairseq-rope-compare "$ROPE_HINT"
bash "$RECIPE_DIR/sample.sh"

mkdir -p "$OUT_DIR"
cd "$REPO_ROOT"  # paths in the table relative to the repository
logs=(); results=()
names=()
for entry in $ARCHS; do names+=("${entry%%=*}"); done  # a run is ARCH or NAME=ARCH (run.sh)
# shellcheck disable=SC2206
seeds=(${SEEDS:-})
first_seed=${seeds[0]:+_seed${seeds[0]}}  # (the runs' directories are NAME_seedS with SEEDS, else NAME)
for name in "${names[@]}"; do
  logs+=("$name=$WORK_DIR/checkpoints/$name$first_seed/train.log")
  if [ ${#seeds[@]} -eq 0 ]; then results+=(--result "$name=$WORK_DIR/eval/$name/result.json"); fi
  for seed in "${seeds[@]}"; do results+=(--result "$name=$WORK_DIR/eval/${name}_seed$seed/result.json"); done
done
fairseq-rope-plot-training "${logs[@]}" --out "$OUT_DIR/${NAME}_curves.png" \
  --title "$TITLE: training curves${seeds[0]:+ (seed ${seeds[0]})}"
max_update=$(sed -n 's/^MAX_UPDATE=//p' "$WORK_DIR/checkpoints/${names[0]}$first_seed/.done")
fairseq-rope-compare --src "$RAW_DIR/test.$SRC" "${results[@]}" --buckets "$BUCKETS" \
  --note "Models: sample.sh's, $max_update updates, identical settings for every run; checkpoints: average of the last ${AVERAGE_LAST:-5}${seeds[0]:+; training seeds ${seeds[*]}}." \
  --title "$TITLE: quality by source length" \
  --out-md "$OUT_DIR/${NAME}_by_length.md" --out-png "$OUT_DIR/${NAME}_by_length.png"
log "figures in $OUT_DIR: ${NAME}_curves.png, ${NAME}_by_length.png (+ ${NAME}_by_length.md)"
