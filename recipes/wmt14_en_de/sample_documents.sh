#!/usr/bin/env bash
# Document-level translation on a generated sample, offline: sentence-level models against models
# trained with the previous sentences of their document (CONTEXT=K), for several position encodings.
# make_sample_documents.py (beside this script) writes English-German documents whose "it" is er,
# sie or es by the gender of a noun 0-3 sentences back, and a contrastive pronoun test in
# ContraPro's format; then, for each K of CONTEXTS, sample.sh's settings train every run of ARCHS
# on the documents with context K, average, translate the test documents in order (each sentence
# with its K previous sentences and the model's own previous translations) and score the pronoun
# test in context. Prints one table: BLEU, chrF, d-BLEU, time per document, and the pronouns right
# by antecedent distance.
#
#   WORK_DIR   <repo>/work/sample_documents (the corpus in raw/, each K in context<K>/)
#   CONTEXTS   "0 1 3 5": sentence-level, one, three and five previous sentences
#   ARCHS      "rope_transformer transformer rpe_transformer alibi_transformer nope_transformer"
#   ARCHS_K<K> the runs of context K, where they are not ARCHS' (default ARCHS_K5: "rope_transformer
#              transformer", inputs of six sentences for RoPE and a table of positions)
#   CONTEXT_KEEP_SENTENCES 0: each training sentence once, with its context (prepare.sh)
#   SEED_CORPUS 1, TRAIN_DOCUMENTS 3000 (about 22,600 sentences), TEST_DOCUMENTS 120 (about 870
#   sentences, 300 pronouns), VALID_DOCUMENTS 40
#   OUT_DIR    $WORK_DIR: where the table ($NAME.md) and, with matplotlib, the plot of pronouns right by
#              distance ($NAME.png) go; OUT_DIR=docs remakes the committed figures. NAME sample_documents
# Every knob of sample.sh and run.sh applies (MAX_UPDATE, PARALLEL_RUNS, ...). About 3 minutes per
# run on 2 CPU cores, two runs at a time: about 30 minutes for the 17 runs of the defaults.
set -euo pipefail
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/sample_documents}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CONTEXTS=${CONTEXTS:-0 1 3 5}
ARCHS=${ARCHS:-rope_transformer transformer rpe_transformer alibi_transformer nope_transformer}
ARCHS_K5=${ARCHS_K5-rope_transformer transformer}
archs_of() { local v=ARCHS_K$1; echo "${!v-$ARCHS}"; }  # the runs of context $1
SEED_CORPUS=${SEED_CORPUS:-1}
TRAIN_DOCUMENTS=${TRAIN_DOCUMENTS:-3000}
VALID_DOCUMENTS=${VALID_DOCUMENTS:-40}
TEST_DOCUMENTS=${TEST_DOCUMENTS:-120}
for v in SEED_CORPUS TRAIN_DOCUMENTS VALID_DOCUMENTS TEST_DOCUMENTS; do need_int "$v" "${!v}" 1; done
[ -n "${CONTEXTS// /}" ] || die "CONTEXTS is empty: name at least one context size, e.g. CONTEXTS=\"0 3\""
for k in $CONTEXTS; do need_int "CONTEXTS (each)" "$k" 0; done
for k in $CONTEXTS; do
  [ -n "$(archs_of "$k")" ] || die "ARCHS_K$k is empty: name the runs of context $k, or leave $k out of CONTEXTS"
  for arch in $(archs_of "$k"); do
    [[ "$arch" =~ ^[A-Za-z0-9_]+$ ]] || die "ARCHS: '$arch' must be an architecture name (runs are named <arch>_k<K>)"
  done
done

OUT_DIR=${OUT_DIR:-$WORK_DIR}
NAME=${NAME:-sample_documents}
[[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ ]] || die "NAME must be a file name (letters, digits, _ . -), got '$NAME'"
n_runs=0; for k in $CONTEXTS; do n_runs=$((n_runs + $(archs_of "$k" | wc -w))); done
log "$n_runs runs (contexts $CONTEXTS), ${MAX_UPDATE:-800} updates each, \
${PARALLEL_RUNS:-2} at a time; a run's progress: its train.log under $WORK_DIR/context<K>/checkpoints"
RAW=$WORK_DIR/raw
# the pronoun test's context files hold as many sentences as the largest context
CONTEXT_LINES=1; for k in $CONTEXTS; do [ "$k" -le "$CONTEXT_LINES" ] || CONTEXT_LINES=$k; done
corpus="seed=$SEED_CORPUS documents=$TRAIN_DOCUMENTS/$VALID_DOCUMENTS/$TEST_DOCUMENTS context-lines=$CONTEXT_LINES"
if done_ok "$RAW" "$corpus"; then
  log "document corpus ready: $RAW"
else
  log "generating the document corpus ($corpus) -> $RAW"
  rm -rf "$RAW"
  "$PYTHON" "$RECIPE_DIR/make_sample_documents.py" --out-dir "$RAW" --seed "$SEED_CORPUS" \
    --train-documents "$TRAIN_DOCUMENTS" --valid-documents "$VALID_DOCUMENTS" --test-documents "$TEST_DOCUMENTS" \
    --context-lines "$CONTEXT_LINES" \
    2>&1 | tail -n 1 >&2
  mark_done "$RAW" "$corpus"
fi

results=()
for k in $CONTEXTS; do
  runs=""
  for arch in $(archs_of "$k"); do
    runs="$runs ${arch}_k$k=$arch"; results+=("$WORK_DIR/context$k/eval/${arch}_k$k/result.json")
  done
  mkdir -p "$WORK_DIR/context$k"
  output=$WORK_DIR/context$k/sample.log
  log "=== context $k: $(archs_of "$k"); the whole output: $output ==="
  # the terminal shows each run's finished stages and any error; everything goes to $output
  WORK_DIR=$WORK_DIR/context$k RAW_DIR=$RAW CONTEXT=$k ARCHS="${runs# }" DOCIDS=$RAW/test.docids \
    CONTRASTIVE_JSON=$RAW/pronouns.json CONTRASTIVE_TEXT=$RAW/pronouns.text CONTRASTIVE_CONTEXT=$RAW/pronouns.context \
    CONTRASTIVE_CONTEXT_LINES=$CONTEXT_LINES TEST_SET="generated sample documents ($RAW/test.{en,de,docids})" \
    bash "$RECIPE_DIR/sample.sh" 2>&1 | tee "$output" | { grep --line-buffered -E "=== (train|evaluate) |ERROR" || true; } \
    || die "context $k failed: see $output"
done
mkdir -p "$OUT_DIR"
log "=== all contexts ($OUT_DIR/$NAME.md) ==="
fairseq-rope-results "${results[@]}" --output "$OUT_DIR/$NAME.md"
if "$PYTHON" -c "import matplotlib" 2>/dev/null; then
  "$PYTHON" "$RECIPE_DIR/plot_documents.py" "${results[@]}" --output "$OUT_DIR/$NAME.png" 2>&1 | tail -n 1 >&2
else
  log "no plot: matplotlib is not installed (pip install 'fairseq-rope[plots]')"
fi
log "done in $SECONDS s"
