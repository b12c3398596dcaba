#!/usr/bin/env bash
# Figures of the offline sample run (sample.sh, which this runs first: finished stages are skipped):
#   $OUT_DIR/${NAME}_curves.png     train loss, valid loss (and valid BLEU if logged) against updates,
#                                   every run on one chart (fairseq-rope-plot-training); with SEEDS each
#                                   system's mean over its seeds, a band from the lowest to the highest
#   $OUT_DIR/${NAME}_valid_loss.md  valid nll_loss at equal updates, mean ± sd over seeds, the difference
#                                   to the first run with Welch's interval, and the updates each seed
#                                   needs to reach the first run's final loss (convergence)
#   $OUT_DIR/${NAME}_flatness.md    each run's valid loss over the last FLAT_LAST (0.2) of its updates: flat when
#                                   less than FLAT_DROP (0.01, relative) lower (fairseq-rope-tune flat; with
#                                   FLAT_MEAN_OF K, each end of the window the mean of the K validations up to it)
#   $OUT_DIR/${NAME}_by_length.png  sacreBLEU and chrF by source length on the sample's test set, with
#   $OUT_DIR/${NAME}_by_length.md   paired bootstrap p-values against the first run (fairseq-rope-compare)
# Knobs:
#   OUT_DIR   default: $WORK_DIR (work/sample); OUT_DIR=docs regenerates the committed docs/ figures
#   BUCKETS   10,20,30 (source words: 1-10, 11-20, 21-30, 31+)
#   ARCHS     "transformer rope_transformer": the runs, as run.sh takes them (ARCH or NAME=ARCH, with
#             ARGS_<name>); the first is the baseline of the comparison
#   SEEDS     training seeds (run.sh's knob): with several, the table and the by-length figure give each
#             run's mean ± standard deviation over its seeds (error bars) and the test over seeds and
#             sentences; the curves and the valid loss table are over every seed
#   TEST_PARTS  unset; "PART=FIRST-LAST ...": the test set is several written one after the other, and
#             each part also gets its own table and figure, $OUT_DIR/${NAME}_PART_by_length.{md,png}
#             (fairseq-rope-compare --lines FIRST-LAST), e.g. "prose=1-1200 help=1201-2400"
#   ROPE_AUTO 0; 1: every RoPE run also translated with --rope-scaling auto, as the system NAME_auto (run.sh)
#   AGAINST   unset; "SYSTEM ...": the same tables with SYSTEM as the one the others are tested against,
#             $OUT_DIR/${NAME}_against_SYSTEM.md (and per part, ${NAME}_PART_against_SYSTEM.md)
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
part_names=() part_lines=()  # TEST_PARTS read once, before any training: "prose=1-1200" is prose and 1-1200
for part in ${TEST_PARTS:-}; do
  [[ "$part" =~ ^([A-Za-z0-9_]+)=([0-9]+-[0-9]+)$ ]] || die "TEST_PARTS: '$part' must be PART=FIRST-LAST (e.g. prose=1-1200)"
  part_names+=("${BASH_REMATCH[1]}") part_lines+=("${BASH_REMATCH[2]}")
done

names=()
for entry in $ARCHS; do names+=("${entry%%=*}"); done  # a run is ARCH or NAME=ARCH (run.sh)
for base in ${AGAINST:-}; do
  [[ " ${names[*]} " == *" $base "* ]] || die "AGAINST: '$base' is not one of the runs (ARCHS: $ARCHS)"
  [ "$base" != "${names[0]}" ] || die "AGAINST: '$base' is the first of ARCHS, the runs' baseline already"
done
need_cmd fairseq-rope-plot-training "$ROPE_HINT"; need_cmd fairseq-rope-compare "$ROPE_HINT"; need_cmd fairseq-rope-tune "$ROPE_HINT"
bash "$RECIPE_DIR/sample.sh"

mkdir -p "$OUT_DIR"
cd "$REPO_ROOT"  # paths in the table relative to the repository
logs=(); results=(); runs_dirs=()
# shellcheck disable=SC2206
seeds=(${SEEDS:-})
first_seed=${seeds[0]:+_seed${seeds[0]}}  # (the runs' directories are NAME_seedS with SEEDS, else NAME)
declare -A arch_of=()
for entry in $ARCHS; do arch_of[${entry%%=*}]=${entry#*=}; done
for name in "${names[@]}"; do
  for run in $(runs_of "$name"); do
    logs+=("$name=$WORK_DIR/checkpoints/$run/train.log") runs_dirs+=("$name=$WORK_DIR/checkpoints/$run")
    results+=(--result "$name=$WORK_DIR/eval/$run/result.json")
  done
done
# ROPE_AUTO=1 (run.sh's): every RoPE run's second translation, with --rope-scaling auto, as the system <name>_auto
if [ "${ROPE_AUTO:-0}" = 1 ]; then
  for name in "${names[@]}"; do
    [[ "${arch_of[$name]}" == rope_transformer* ]] || continue
    for run in $(runs_of "$name"); do results+=(--result "${name}_auto=$WORK_DIR/eval/$(auto_run "$name" "$run")/result.json"); done
  done
fi
own_settings=$({ compgen -v LR_; compgen -v WARMUP_UPDATES_; } || true)  # (one name a line)
fairseq-rope-plot-training "${logs[@]}" --out "$OUT_DIR/${NAME}_curves.png" \
  --title "$TITLE: training curves${seeds[0]:+ (mean over seeds, band: lowest to highest)}" \
  --loss nll_loss --out-md "$OUT_DIR/${NAME}_valid_loss.md"
# whether each run's valid loss had stopped falling at its budget (exit status 3: some had not; the table says)
fairseq-rope-tune flat "${runs_dirs[@]}" --last "${FLAT_LAST:-0.2}" --drop "${FLAT_DROP:-0.01}" \
  --mean-of "${FLAT_MEAN_OF:-1}" --out-md "$OUT_DIR/${NAME}_flatness.md" > /dev/null || [ $? -eq 3 ] || die "fairseq-rope-tune flat failed"
max_update=$(sed -n 's/^MAX_UPDATE=//p' "$WORK_DIR/checkpoints/${names[0]}$first_seed/.done")
unseen=()  # (a length split's longest training source: the longer buckets marked as unseen lengths)
[ -z "${TRAIN_MAX_WORDS:-}" ] || unseen=(--train-max-words "$TRAIN_MAX_WORDS")
fairseq-rope-compare --src "$RAW_DIR/test.$SRC" "${results[@]}" --buckets "$BUCKETS" "${unseen[@]}" \
  --note "Models: sample.sh's, $max_update updates, $([ -n "$own_settings" ] && echo "each system's learning rate and warm-up its own (LR_*, WARMUP_UPDATES_*: $(for v in $own_settings; do printf '%s=%s ' "$v" "${!v}"; done | sed 's/ $//'))" || echo "identical settings for every run"); checkpoints: average of the last ${AVERAGE_LAST:-5}${seeds[0]:+; training seeds ${seeds[*]}}${LENPENS:+; length penalty chosen per run on valid BLEU from $LENPENS}." \
  --title "$TITLE: quality by source length" \
  --out-md "$OUT_DIR/${NAME}_by_length.md" --out-png "$OUT_DIR/${NAME}_by_length.png"
for k in "${!part_names[@]}"; do
  part=${part_names[k]}
  fairseq-rope-compare --src "$RAW_DIR/test.$SRC" "${results[@]}" --buckets "$BUCKETS" "${unseen[@]}" --lines "${part_lines[k]}" \
    --note "Models: as in ${NAME}_by_length.md; the $part part of the test set." \
    --title "$TITLE, $part: quality by source length" \
    --out-md "$OUT_DIR/${NAME}_${part}_by_length.md" --out-png "$OUT_DIR/${NAME}_${part}_by_length.png"
done
for base in ${AGAINST:-}; do
  against=()  # (results: --result NAME=FILE pairs; base's first, the others in their order)
  for ((i = 0; i < ${#results[@]}; i += 2)); do [[ "${results[i + 1]}" != "$base="* ]] || against+=("${results[@]:i:2}"); done
  for ((i = 0; i < ${#results[@]}; i += 2)); do [[ "${results[i + 1]}" == "$base="* ]] || against+=("${results[@]:i:2}"); done
  for k in -1 "${!part_names[@]}"; do  # (-1: the whole test set)
    lines=() file=${NAME}_against_$base.md what="the whole test set" title=$TITLE
    if [ "$k" -ge 0 ]; then
      part=${part_names[k]}
      lines=(--lines "${part_lines[k]}") file=${NAME}_${part}_against_$base.md what="the $part part of the test set"
      title="$TITLE, $part"
    fi
    fairseq-rope-compare --src "$RAW_DIR/test.$SRC" "${against[@]}" --buckets "$BUCKETS" "${unseen[@]}" "${lines[@]}" \
      --note "Models: as in ${NAME}_by_length.md; $what, every run tested against $base." \
      --title "$title: every run against $base" --out-md "$OUT_DIR/$file"
  done
done
log "figures in $OUT_DIR: ${NAME}_curves.png (+ ${NAME}_valid_loss.md), ${NAME}_by_length.png (+ ${NAME}_by_length.md${TEST_PARTS:+, and per part})${AGAINST:+; against $AGAINST: ${NAME}_*against_*.md}"
