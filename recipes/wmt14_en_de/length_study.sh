#!/usr/bin/env bash
# Length extrapolation on the offline sample: RoPE vs fairseq's sinusoidal Transformer, both
# trained only on sample pairs whose English side has at most MAX_TRAIN_WORDS words, then tested
# on a length-stratified test set whose buckets mostly hold longer sentences than any seen in
# training. Offline, CPU; about as long as sample.sh (the same models and number of updates).
#
#   MAX_TRAIN_WORDS  15: longest training source, in whitespace-separated English words
#   BUCKETS          10,15,20,25,30,40: test buckets in source words (1-10, 11-15, ..., 31-40, 41+)
#   PER_BUCKET       100 test sentences per bucket
#   TEST_SEED        2: make_sample_corpus.py seed of the test set (the bundled sample is
#                    seed 1; test sentences that occur anywhere in the sample are skipped)
#   WORK_DIR         <repo>/work/length_study_max$MAX_TRAIN_WORDS
#   OUT_DIR          where length_study.md and length_study.png go (default: $WORK_DIR);
#                    OUT_DIR=docs regenerates the committed docs/length_study.{md,png}
#   ARCHS            "transformer rope_transformer": the runs, as run.sh takes them (the first is the
#                    baseline of the comparison)
#   MAX_UPDATE       1000 (pinned here, so that the study does not move with sample.sh's default)
#   SEEDS            run.sh's: e.g. "1 2 3" trains every run once per seed and the table tests over the
#                    seeds (Welch's t, two-sided, with intervals); unset: one run each (seed 1)
# Every knob of sample.sh (MODEL_ARGS, MAX_UPDATE, LR, ...) and of its steps applies. The corpus
# is made by length_study_data.py (beside this script), the comparison by fairseq-rope-compare. Re-running skips
# finished stages; changing MAX_TRAIN_WORDS uses another WORK_DIR.
set -euo pipefail
WORK_DIR_SET=${WORK_DIR:-}  # before common.sh, which gives WORK_DIR the full recipe's default
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

MAX_TRAIN_WORDS=${MAX_TRAIN_WORDS:-15}
BUCKETS=${BUCKETS:-10,15,20,25,30,40}
PER_BUCKET=${PER_BUCKET:-100}
TEST_SEED=${TEST_SEED:-2}
need_int MAX_TRAIN_WORDS "$MAX_TRAIN_WORDS" 1
need_cmd fairseq-rope-compare "$ROPE_HINT"
need_int PER_BUCKET "$PER_BUCKET" 1
need_int TEST_SEED "$TEST_SEED" 0
[[ "$BUCKETS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "BUCKETS must look like 10,15,20 (source words), got '$BUCKETS'"
export WORK_DIR=${WORK_DIR_SET:-$REPO_ROOT/work/length_study_max$MAX_TRAIN_WORDS}
export ARCHS=${ARCHS:-transformer rope_transformer}
export MAX_UPDATE=${MAX_UPDATE:-1000}
OUT_DIR=${OUT_DIR:-$WORK_DIR}
SAMPLE_DIR=$RECIPE_DIR/sample
RAW=$WORK_DIR/raw
start=$SECONDS

settings="sample=$SAMPLE_DIR $(cd "$SAMPLE_DIR" && cksum train.en train.de valid.en valid.de test.en | tr '\n' ' ')
generator=$(cksum < "$RECIPE_DIR/make_sample_corpus.py")
max_train_words=$MAX_TRAIN_WORDS buckets=$BUCKETS per_bucket=$PER_BUCKET test_seed=$TEST_SEED"
if ! { [ -d "$RAW" ] && done_ok "$RAW" "$settings"; }; then
  log "building the study corpus in $RAW (train <= $MAX_TRAIN_WORDS words; test: $PER_BUCKET per bucket of $BUCKETS)"
  "$PYTHON" "$RECIPE_DIR/length_study_data.py" --sample-dir "$SAMPLE_DIR" --out-dir "$RAW" \
    --max-train-words "$MAX_TRAIN_WORDS" --buckets "$BUCKETS" --per-bucket "$PER_BUCKET" --test-seed "$TEST_SEED"
  mark_done "$RAW" "$settings"
fi

RAW_DIR=$RAW TEST_SET="length study test set (make_sample_corpus.py seed $TEST_SEED, $PER_BUCKET per bucket)" \
  bash "$RECIPE_DIR/sample.sh"

# lengths in BPE tokens too: what the position encodings actually see (fairseq adds one EOS)
bpe_max() { awk 'NF > m { m = NF } END { print m + 0 }' "$1"; }
bpe_note="BPE tokens per source (what the positions count, without EOS): training at most \
$(bpe_max "$WORK_DIR/prep/bpe/train.$SRC"), test at most $(bpe_max "$WORK_DIR/prep/bpe/test.$SRC")."
names=()
for entry in $ARCHS; do names+=("${entry%%=*}"); done  # a run is ARCH or NAME=ARCH (run.sh)
first_run=$(runs_of "${names[0]}" | head -n 1)
max_update=$(sed -n 's/^MAX_UPDATE=//p' "$WORK_DIR/checkpoints/$first_run/.done")
model_note="Models: sample.sh's, $max_update updates, identical settings for every arch, training seeds ${SEEDS:-1}; \
training pairs: $(line_count "$RAW/train.$SRC") of $(line_count "$SAMPLE_DIR/train.$SRC") sample pairs; \
test set: make_sample_corpus.py seed $TEST_SEED, $PER_BUCKET sentences per bucket, none in the sample \
(\`${RAW#"$REPO_ROOT"/}/README\`)."
results=()
for name in "${names[@]}"; do
  for run in $(runs_of "$name"); do results+=(--result "$name=$WORK_DIR/eval/$run/result.json"); done
done
mkdir -p "$OUT_DIR"
cd "$REPO_ROOT"  # paths in the table relative to the repository
fairseq-rope-compare --src "$RAW/test.$SRC" "${results[@]}" --buckets "$BUCKETS" \
  --train-max-words "$MAX_TRAIN_WORDS" --title "Length extrapolation: trained on sources of at most $MAX_TRAIN_WORDS words" \
  --note "$model_note" --note "$bpe_note" \
  --out-md "$OUT_DIR/length_study.md" --out-png "$OUT_DIR/length_study.png" --out-json "$WORK_DIR/length_study.json"
log "done in $((SECONDS - start)) s: $OUT_DIR/length_study.md, $OUT_DIR/length_study.png"
