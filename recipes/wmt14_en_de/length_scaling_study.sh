#!/usr/bin/env bash
# Length generalisation study: does a RoPE option hold up past the training lengths, and how do
# RoPE and its options stand against ALiBi and the other relative encodings there?
# The models of length_study.sh (sample settings, trained only on sources of at most
# MAX_TRAIN_WORDS words): fairseq's transformer (the baseline), rope_transformer and the BASELINES
# (ALiBi, T5's bias, Shaw's RPE); all of them again trained with concatenations of CONCAT_PAIRS
# training pairs added to their data (Varis & Bojar 2021); and rope_transformer trained with
# --rope-random-positions RANDOM_POSITIONS. Each RoPE
# model is translated with every inference-time scaling of SCALINGS on a validation set
# (length-stratified like the test set, another seed: VALID_SEED); per model the setting with the
# best BLEU on the validation sentences longer than any training source is chosen there. The test
# set is then translated once per model without scaling, with --rope-scaling auto, and with the
# chosen setting, and compared per bucket with the baseline (paired bootstrap), with each run's
# hyp/ref length ratio and share of outputs that repeat a word 4+ times in a row.
# The output notes the percentiles of the training sources' lengths: --rope-scaling auto's L is the
# single longest one. Offline, CPU, about an hour on 2 cores.
#
#   MAX_TRAIN_WORDS, BUCKETS, PER_BUCKET, TEST_SEED   as length_study.sh (15; 10,15,20,25,30,40; 100; 2)
#   VALID_SEED         3: make_sample_corpus.py seed of the validation set
#   RANDOM_POSITIONS   256: training positions drawn from [0, 256) (training sources have <= 30 tokens); 0: no such model
#   CONCAT_PAIRS       2: pairs per added concatenation (prepare.sh's CONCAT_PAIRS); 1: no such models
#   BASELINES          every encoding the plugin registers but RoPE (alibi_transformer nope_transformer
#                      rpe_transformer t5bias_transformer): other architectures trained
#                      and tested beside them, with and without the concatenations ("" for none)
#   SCALINGS           "none auto linear:2 linear:3 ntk:2 ntk:3 yarn:2 yarn:3" (scaling:factor; yarn's
#                      training length L is the model's longest training source in BPE tokens + its EOS;
#                      auto reads L from the checkpoint)
#   WORK_DIR           <repo>/work/length_study_max$MAX_TRAIN_WORDS (shared with length_study.sh)
#   OUT_DIR            where length_scaling_study.{md,png} and the selection table go (default: $WORK_DIR)
set -euo pipefail
WORK_DIR_SET=${WORK_DIR:-}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

MAX_TRAIN_WORDS=${MAX_TRAIN_WORDS:-15}
BUCKETS=${BUCKETS:-10,15,20,25,30,40}
PER_BUCKET=${PER_BUCKET:-100}
TEST_SEED=${TEST_SEED:-2}
VALID_SEED=${VALID_SEED:-3}
RANDOM_POSITIONS=${RANDOM_POSITIONS:-256}
CONCAT_PAIRS=${CONCAT_PAIRS:-2}
SCALINGS=${SCALINGS:-none auto linear:2 linear:3 ntk:2 ntk:3 yarn:2 yarn:3}
BASELINES=${BASELINES-$(registered_encodings | grep -vx rope_transformer | tr '\n' ' ')}
for arch in $BASELINES; do
  [[ "$arch" =~ ^[a-z0-9_]+$ ]] && [ "$arch" != transformer ] && [ "$arch" != rope_transformer ] \
    || die "BASELINES: '$arch' must be an architecture other than transformer and rope_transformer"
done
need_int MAX_TRAIN_WORDS "$MAX_TRAIN_WORDS" 1
need_int VALID_SEED "$VALID_SEED" 0
need_int RANDOM_POSITIONS "$RANDOM_POSITIONS" 0
need_int CONCAT_PAIRS "$CONCAT_PAIRS" 1
[ "$VALID_SEED" != "$TEST_SEED" ] || die "VALID_SEED must differ from TEST_SEED ($TEST_SEED): settings are chosen on the validation set"
for s in $SCALINGS; do
  [[ "$s" =~ ^(none|auto|(linear|ntk|yarn):[0-9]+(\.[0-9]+)?)$ ]] || die "SCALINGS: '$s' is not none, auto or linear|ntk|yarn:FACTOR"
done
export WORK_DIR=${WORK_DIR_SET:-$REPO_ROOT/work/length_study_max$MAX_TRAIN_WORDS}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
export MAX_TRAIN_WORDS BUCKETS PER_BUCKET TEST_SEED
start=$SECONDS

# 1. baseline and RoPE (length_study.sh: corpus, training, test translations without scaling)
OUT_DIR=$WORK_DIR ARCHS="transformer rope_transformer $BASELINES" CONCAT_PAIRS=1 SEEDS= bash "$RECIPE_DIR/length_study.sh"
models=(rope)
declare -A DIRS=([rope]=$WORK_DIR)
# 2. RoPE with random positions: the same corpus and settings in a work dir of its own
if [ "$RANDOM_POSITIONS" -gt 0 ]; then
  RANDOM_DIR=$WORK_DIR/random_positions
  WORK_DIR=$RANDOM_DIR OUT_DIR=$RANDOM_DIR ARCHS=rope_transformer CONCAT_PAIRS=1 \
    EXTRA_TRAIN_ARGS="${EXTRA_TRAIN_ARGS:+$EXTRA_TRAIN_ARGS }--rope-random-positions $RANDOM_POSITIONS" \
    SEEDS= bash "$RECIPE_DIR/length_study.sh"
  cmp -s "$WORK_DIR/data-bin/dict.$SRC.txt" "$RANDOM_DIR/data-bin/dict.$SRC.txt" \
    || die "the random-positions run has another dictionary than $WORK_DIR/data-bin: not the same data"
  models+=(rope_random) DIRS[rope_random]=$RANDOM_DIR
fi
# 2b. both architectures with concatenations of CONCAT_PAIRS training pairs added (prepare.sh's CONCAT_PAIRS)
if [ "$CONCAT_PAIRS" -gt 1 ]; then
  CONCAT_DIR=$WORK_DIR/concat$CONCAT_PAIRS
  WORK_DIR=$CONCAT_DIR OUT_DIR=$CONCAT_DIR ARCHS="transformer rope_transformer $BASELINES" CONCAT_PAIRS=$CONCAT_PAIRS \
    SEEDS= bash "$RECIPE_DIR/length_study.sh"
  cmp -s "$WORK_DIR/data-bin/dict.$SRC.txt" "$CONCAT_DIR/data-bin/dict.$SRC.txt" \
    || die "the concatenated-pairs run has another dictionary than $WORK_DIR/data-bin: it cannot translate the validation set"
  models+=(rope_concat) DIRS[rope_concat]=$CONCAT_DIR
fi
# 3. the validation set: a length-stratified set of another seed, prepared with the same BPE and dictionary
VALID_DIR=$WORK_DIR/validation
if [ ! -f "$VALID_DIR/data-bin/test.$SRC-$TGT.$SRC.bin" ]; then
  log "building the validation set (seed $VALID_SEED) in $VALID_DIR"
  "$PYTHON" "$RECIPE_DIR/length_study_data.py" --sample-dir "$RECIPE_DIR/sample" --out-dir "$VALID_DIR/raw" \
    --max-train-words "$MAX_TRAIN_WORDS" --buckets "$BUCKETS" --per-bucket "$PER_BUCKET" --test-seed "$VALID_SEED"
  WORK_DIR=$VALID_DIR RAW_DIR=$VALID_DIR/raw BPE_MERGES=${BPE_MERGES:-1000} CONCAT_PAIRS=1 bash "$RECIPE_DIR/prepare.sh"
fi
cmp -s "$WORK_DIR/data-bin/dict.$SRC.txt" "$VALID_DIR/data-bin/dict.$SRC.txt" \
  || die "$VALID_DIR/data-bin has another dictionary than $WORK_DIR/data-bin"
longest_of() {  # the longest training source of a model's data, in BPE tokens + EOS (yarn's L)
  local dir=$1 file
  file=$(ls "$dir"/prep/bpe/train.concat*."$SRC" 2>/dev/null | head -n 1 || true)
  awk 'NF > m { m = NF } END { print m + 1 }' "${file:-$dir/prep/bpe/train.$SRC}"
}
overrides() {  # scaling:factor L -> MODEL_OVERRIDES
  local kind=${1%%:*} factor=${1#*:}
  case $kind in
    none) echo "" ;;
    auto) echo "{'rope_scaling': 'auto'}" ;;  # L: recorded in the checkpoint by training
    yarn) echo "{'rope_scaling': 'yarn', 'rope_scaling_factor': $factor, 'rope_original_max_positions': $2}" ;;
    *) echo "{'rope_scaling': '$kind', 'rope_scaling_factor': $factor}" ;;
  esac
}
translate() {  # model scaling data-dir ref eval-dir
  local dir=${DIRS[$1]}
  CHECKPOINT=$dir/checkpoints/rope_transformer/checkpoint_avg_last5.pt DATA_BIN=$3 REF=$4 EVAL_DIR=$5 \
    MODEL_OVERRIDES=$(overrides "$2" "$(longest_of "$dir")") ARCH=rope_transformer \
    RUN_NAME="$1-${2/:/}" TEST_SET="length study ($(basename "$(dirname "$(dirname "$4")")"))" \
    bash "$RECIPE_DIR/evaluate.sh"
}
for model in "${models[@]}"; do
  for s in $SCALINGS; do
    translate "$model" "$s" "$VALID_DIR/data-bin" "$VALID_DIR/raw/test.$TGT" "$WORK_DIR/eval_validation/$model-${s/:/}"
  done
done
# 4. choice on the validation set: best BLEU on the sentences longer than any training source
mkdir -p "$OUT_DIR"
choice="" validation_md=()
for model in "${models[@]}"; do
  runs=()
  for s in $SCALINGS; do runs+=(--result "$s=$WORK_DIR/eval_validation/$model-${s/:/}/result.json"); done
  fairseq-rope-compare --src "$VALID_DIR/raw/test.$SRC" --ref "$VALID_DIR/raw/test.$TGT" "${runs[@]}" \
    --buckets "$MAX_TRAIN_WORDS" --train-max-words "$MAX_TRAIN_WORDS" --best-above "$MAX_TRAIN_WORDS" \
    --title "Validation set (seed $VALID_SEED): $model by scaling" \
    --out-md "$WORK_DIR/validation_$model.md" --out-json "$WORK_DIR/validation_$model.json" > /dev/null
  choice+="$model=$(json_field best < "$WORK_DIR/validation_$model.json") "
  validation_md+=("$WORK_DIR/validation_$model.md")
done
choice=${choice% }
cat "${validation_md[@]}" > "$OUT_DIR/length_scaling_validation.md.tmp"
mv -f "$OUT_DIR/length_scaling_validation.md.tmp" "$OUT_DIR/length_scaling_validation.md"
log "chosen on the validation set: $choice ($OUT_DIR/length_scaling_validation.md)"
# 5. the test set, once per model: without scaling (length_study.sh's), with auto, with the chosen setting
results=(--result "transformer=$WORK_DIR/eval/transformer/result.json")
[ "$CONCAT_PAIRS" -gt 1 ] && results+=(--result "transformer_concat=$CONCAT_DIR/eval/transformer/result.json")
for arch in $BASELINES; do
  results+=(--result "${arch%_transformer}=$WORK_DIR/eval/$arch/result.json")
  [ "$CONCAT_PAIRS" -gt 1 ] && results+=(--result "${arch%_transformer}_concat=$CONCAT_DIR/eval/$arch/result.json")
done
for pick in $choice; do
  model=${pick%%=*} chosen=${pick#*=}
  dir=${DIRS[$model]}
  cmp -s "$WORK_DIR/raw/test.$TGT" "$dir/raw/test.$TGT" || die "$dir has another test set than $WORK_DIR"
  results+=(--result "$model=$dir/eval/rope_transformer/result.json")
  for s in $(printf '%s\n' auto "$chosen" | awk '!seen[$0]++'); do
    [ "$s" != none ] || continue
    translate "$model" "$s" "$dir/data-bin" "$WORK_DIR/raw/test.$TGT" "$WORK_DIR/eval_test/$model-${s/:/}"
    results+=(--result "$model+${s/:/x}=$WORK_DIR/eval_test/$model-${s/:/}/result.json")
  done
done
# the training sources' lengths (BPE tokens + EOS): auto's L is the longest, whatever the tail
percentiles() {
  awk '{ print NF + 1 }' "$1" | sort -n | awk '{ v[NR] = $1 } END {
    printf "median %d, 90th percentile %d, 99th percentile %d, longest %d (%d sources)",
      v[int(NR * 0.5) + 1], v[int(NR * 0.9) + 1], v[int(NR * 0.99) + 1], v[NR], NR }'
}
length_note="Training sources in BPE tokens + EOS: $(percentiles "$WORK_DIR/prep/bpe/train.$SRC")"
[ "$CONCAT_PAIRS" -gt 1 ] && length_note+="; with the concatenations: $(percentiles "$(ls "$CONCAT_DIR"/prep/bpe/train.concat*."$SRC" | head -n 1)")"
length_note+=". --rope-scaling auto's L is the longest: a sentence gets YaRN only beyond it."
log "$length_note"
models_note=""
[ "$RANDOM_POSITIONS" -eq 0 ] || models_note="rope_random: trained with --rope-random-positions $RANDOM_POSITIONS; "
[ "$CONCAT_PAIRS" -le 1 ] || models_note+="*_concat: trained on the same pairs plus concatenations of $CONCAT_PAIRS pairs (sources up to $((CONCAT_PAIRS * MAX_TRAIN_WORDS)) words); "
models_note+="yarn's L = the model's longest training source in tokens + EOS ($(longest_of "$WORK_DIR") tokens"
[ "$CONCAT_PAIRS" -le 1 ] || models_note+="; with the concatenations: $(longest_of "$CONCAT_DIR") tokens"
models_note+="); auto: L recorded in the checkpoint."
cd "$REPO_ROOT"
fairseq-rope-compare --src "$WORK_DIR/raw/test.$SRC" --ref "$WORK_DIR/raw/test.$TGT" "${results[@]}" --buckets "$BUCKETS" \
  --train-max-words "$MAX_TRAIN_WORDS" --title "Length generalisation: trained on sources of at most $MAX_TRAIN_WORDS words" \
  --note "Settings chosen on a validation set of seed $VALID_SEED (length_scaling_validation.md); test set of seed $TEST_SEED translated once per chosen setting." \
  --note "$length_note" \
  --note "$models_note" \
  --out-md "$OUT_DIR/length_scaling_study.md" --out-png "$OUT_DIR/length_scaling_study.png" \
  --out-json "$WORK_DIR/length_scaling_study.json"
log "done in $((SECONDS - start)) s: $OUT_DIR/length_scaling_study.md"
