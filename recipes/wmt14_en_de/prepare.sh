#!/usr/bin/env bash
# Step 1: data. Raw text -> Moses tokenization -> cleaning -> joint subwords [-> concatenated pairs] -> fairseq binaries.
#
#   RAW_DIR      directory with train/valid/test.{en,de} plain text. Unset: download WMT14 En-De
#                (download.sh) into $WORK_DIR/raw.
#   WORK_DIR     work directory (default: <repo>/work/wmt14_en_de)
#   PREP_DIR     intermediate text (default: $WORK_DIR/prep)
#   DATA_BIN     fairseq-preprocess output (default: $WORK_DIR/data-bin)
#   TOKENIZER    bpe (subword-nmt, default) or spm (sentencepiece)
#   BPE_MERGES   joint BPE merge operations (default 37000, aiming at the paper's ~37k joint
#                vocabulary; the dictionary size is printed at the end: it is merges + characters
#                minus merge intermediates no longer used, so only approximately 37k)
#   BPE_VOCAB_THRESHOLD  subword-nmt --vocabulary-threshold when applying BPE (default 50)
#   SPM_VOCAB_SIZE (37000), SPM_MODEL_TYPE (unigram|bpe), SPM_INPUT_SENTENCES (10000000)
#   CLEAN_MIN / CLEAN_MAX / CLEAN_RATIO  training pair filter, tokens (default 1 / 250 / 1.5)
#   CONCAT_PAIRS 1 (off). K >= 2: the training data also holds concatenations of K training pairs
#                (fairseq-rope-prep concat-pairs, after the subwords), so that long inputs are seen
#   CONCAT_ORDER consecutive (pairs 1..K, K+1..2K, ...) or random (a permutation drawn with CONCAT_SEED, 1)
#   WORKERS      parallel processes (default: number of CPUs)
# Every output is written to a temporary name and renamed when complete; a re-run skips
# finished files, continues unfinished ones, and stops with an error if $PREP_DIR was made with
# other settings.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TOKENIZER=${TOKENIZER:-bpe}
BPE_MERGES=${BPE_MERGES:-37000}
BPE_VOCAB_THRESHOLD=${BPE_VOCAB_THRESHOLD:-50}
SPM_VOCAB_SIZE=${SPM_VOCAB_SIZE:-37000}
SPM_MODEL_TYPE=${SPM_MODEL_TYPE:-unigram}
SPM_INPUT_SENTENCES=${SPM_INPUT_SENTENCES:-10000000}
CLEAN_MIN=${CLEAN_MIN:-1}
CLEAN_MAX=${CLEAN_MAX:-250}
CLEAN_RATIO=${CLEAN_RATIO:-1.5}
CONCAT_PAIRS=${CONCAT_PAIRS:-1}
CONCAT_ORDER=${CONCAT_ORDER:-consecutive}
CONCAT_SEED=${CONCAT_SEED:-1}
WORKERS=${WORKERS:-$(nproc 2>/dev/null || echo 1)}
PREP_DIR=${PREP_DIR:-$WORK_DIR/prep}
DATA_BIN=${DATA_BIN:-$WORK_DIR/data-bin}

one_of TOKENIZER "$TOKENIZER" bpe spm
need_int BPE_MERGES "$BPE_MERGES" 1
need_int BPE_VOCAB_THRESHOLD "$BPE_VOCAB_THRESHOLD" 0
need_int SPM_VOCAB_SIZE "$SPM_VOCAB_SIZE" 8
one_of SPM_MODEL_TYPE "$SPM_MODEL_TYPE" unigram bpe
need_int SPM_INPUT_SENTENCES "$SPM_INPUT_SENTENCES" 0
need_int CLEAN_MIN "$CLEAN_MIN" 0
need_int CLEAN_MAX "$CLEAN_MAX" 1
need_num CLEAN_RATIO "$CLEAN_RATIO"
need_int CONCAT_PAIRS "$CONCAT_PAIRS" 1
one_of CONCAT_ORDER "$CONCAT_ORDER" consecutive random
need_int CONCAT_SEED "$CONCAT_SEED" 0
need_int WORKERS "$WORKERS" 1
need_cmd "$PYTHON" "set PYTHON or activate the virtual environment"
need_cmd fairseq-preprocess "pip install fairseq-fixed"
need_cmd fairseq-rope-prep "$ROPE_HINT"
need_cmd fairseq-rope-progress "$ROPE_HINT"
[ "$TOKENIZER" = spm ] || need_cmd subword-nmt "pip install subword-nmt"

if [ -z "${RAW_DIR:-}" ]; then
  log "RAW_DIR not set: downloading WMT14 En-De (download.sh)"
  bash "$RECIPE_DIR/download.sh"
  RAW_DIR=$WORK_DIR/raw
fi
[ -d "$RAW_DIR" ] || die "RAW_DIR=$RAW_DIR is not a directory (expected train/valid/test.$SRC/.$TGT in it)"
RAW_DIR=$(cd "$RAW_DIR" && pwd)
for split in train valid test; do check_parallel "$RAW_DIR/$split"; done

if [ "$TOKENIZER" = bpe ]; then subword="bpe merges=$BPE_MERGES vocabulary-threshold=$BPE_VOCAB_THRESHOLD"
else subword="spm vocab=$SPM_VOCAB_SIZE type=$SPM_MODEL_TYPE input-sentences=$SPM_INPUT_SENTENCES"; fi
SETTINGS="raw=$RAW_DIR $(for s in train valid test; do for l in $SRC $TGT; do
  printf '%s.%s:%s ' $s $l "$(wc -c < "$RAW_DIR/$s.$l" | tr -d ' ')"; done; done)
tokenizer=sacremoses-normalize+tokenize-a-noescape clean=$CLEAN_MIN-$CLEAN_MAX,ratio=$CLEAN_RATIO
subword=$subword"
if [ "$CONCAT_PAIRS" -gt 1 ]; then
  SETTINGS="$SETTINGS concat=$CONCAT_PAIRS,$CONCAT_ORDER"
  [ "$CONCAT_ORDER" != random ] || SETTINGS="$SETTINGS,seed=$CONCAT_SEED"
fi

if [ -f "$DATA_BIN/recipe.env" ] && done_ok "$PREP_DIR" "$SETTINGS"; then
  log "already prepared: $DATA_BIN (from $RAW_DIR); nothing to do"
  exit 0
fi
mkdir -p "$PREP_DIR"
if [ -f "$PREP_DIR/.settings" ] && [ "$(cat "$PREP_DIR/.settings")" != "$SETTINGS" ]; then
  die "$PREP_DIR holds outputs made with other settings:
$(diff "$PREP_DIR/.settings" <(echo "$SETTINGS") | sed 's/^/    /')
  (< made with, > requested). Remove $PREP_DIR and $DATA_BIN, or set another WORK_DIR."
fi
echo "$SETTINGS" > "$PREP_DIR/.settings"
log "raw text: $RAW_DIR; intermediate files: $PREP_DIR; binaries: $DATA_BIN"

# 1. normalize punctuation + tokenize (Moses rules via sacremoses, in parallel)
mkdir -p "$PREP_DIR/tok"
log "tokenizing $RAW_DIR/{train,valid,test}.{$SRC,$TGT} -> $PREP_DIR/tok ($WORKERS workers)"
for split in train valid test; do
  for lang in $SRC $TGT; do
    out=$PREP_DIR/tok/$split.$lang
    if [ -f "$out" ]; then log "tokenized already: $out"; continue; fi
    fairseq-rope-prep tokenize --lang "$lang" -i "$RAW_DIR/$split.$lang" -o "$out" --workers "$WORKERS"
  done
done

# 2. clean the training pairs (length 1-250 tokens, ratio 1.5, as Moses clean-corpus-n)
mkdir -p "$PREP_DIR/clean"
if [ ! -f "$PREP_DIR/clean/train.$TGT" ]; then
  log "cleaning training pairs -> $PREP_DIR/clean/train.{$SRC,$TGT}"
  fairseq-rope-prep clean --src "$PREP_DIR/tok/train.$SRC" --tgt "$PREP_DIR/tok/train.$TGT" \
    --out-src "$PREP_DIR/clean/train.$SRC.part" --out-tgt "$PREP_DIR/clean/train.$TGT.part" \
    --min "$CLEAN_MIN" --max "$CLEAN_MAX" --ratio "$CLEAN_RATIO"
  mv -f "$PREP_DIR/clean/train.$SRC.part" "$PREP_DIR/clean/train.$SRC"
  mv -f "$PREP_DIR/clean/train.$TGT.part" "$PREP_DIR/clean/train.$TGT"  # the target file is the marker
fi
check_parallel "$PREP_DIR/clean/train"

# 3. joint subword model, learned on the cleaned training text of both languages
SUB=$PREP_DIR/$TOKENIZER
mkdir -p "$SUB"
input_of() { [ "$1" = train ] && echo "$PREP_DIR/clean/train.$2" || echo "$PREP_DIR/tok/$1.$2"; }
if [ "$TOKENIZER" = bpe ]; then
  if [ ! -f "$SUB/codes" ]; then
    log "learning $BPE_MERGES joint BPE merges -> $SUB/codes"
    subword-nmt learn-joint-bpe-and-vocab --input "$PREP_DIR/clean/train.$SRC" "$PREP_DIR/clean/train.$TGT" \
      -s "$BPE_MERGES" -o "$SUB/codes.tmp" --write-vocabulary "$SUB/vocab.$SRC.tmp" "$SUB/vocab.$TGT.tmp" \
      2>&1 | tr '\r' '\n' | grep -v '^ *$' | tail -n 1 > "$PREP_DIR/learn-bpe.log"  # its progress bar, last state
    mv -f "$SUB/vocab.$SRC.tmp" "$SUB/vocab.$SRC"; mv -f "$SUB/vocab.$TGT.tmp" "$SUB/vocab.$TGT"
    mv -f "$SUB/codes.tmp" "$SUB/codes"
  fi
  log "applying BPE -> $SUB/{train,valid,test}.{$SRC,$TGT}"
  for split in train valid test; do
    for lang in $SRC $TGT; do
      out=$SUB/$split.$lang
      [ -f "$out" ] && continue
      subword-nmt apply-bpe -c "$SUB/codes" --vocabulary "$SUB/vocab.$lang" \
        --vocabulary-threshold "$BPE_VOCAB_THRESHOLD" --num-workers "$WORKERS" \
        -i "$(input_of $split $lang)" -o "$out.tmp"
      mv -f "$out.tmp" "$out"
    done
  done
else
  if [ ! -f "$SUB/spm.model" ]; then
    log "training a joint sentencepiece $SPM_MODEL_TYPE model, vocabulary $SPM_VOCAB_SIZE -> $SUB/spm.model"
    fairseq-rope-prep spm-train --inputs "$PREP_DIR/clean/train.$SRC" "$PREP_DIR/clean/train.$TGT" \
      --model-prefix "$SUB/spm" --vocab-size "$SPM_VOCAB_SIZE" --model-type "$SPM_MODEL_TYPE" \
      --input-sentence-size "$SPM_INPUT_SENTENCES" --threads "$WORKERS"
  fi
  for split in train valid test; do
    for lang in $SRC $TGT; do
      out=$SUB/$split.$lang
      [ -f "$out" ] && continue
      log "encoding $(input_of $split $lang) -> $out"
      fairseq-rope-prep spm-encode --model "$SUB/spm.model" -i "$(input_of $split $lang)" -o "$out"
    done
  done
fi
for split in train valid test; do check_parallel "$SUB/$split"; done

# 4. (CONCAT_PAIRS=K) the training pairs and concatenations of K of them
train_pref=$SUB/train
if [ "$CONCAT_PAIRS" -gt 1 ]; then
  train_pref=$SUB/train.concat$CONCAT_PAIRS
  if [ ! -f "$train_pref.$TGT" ]; then
    log "adding concatenations of $CONCAT_PAIRS training pairs ($CONCAT_ORDER) -> $train_pref.{$SRC,$TGT}"
    fairseq-rope-prep concat-pairs --src "$SUB/train.$SRC" --tgt "$SUB/train.$TGT" \
      --out-src "$train_pref.$SRC.part" --out-tgt "$train_pref.$TGT.part" \
      -k "$CONCAT_PAIRS" --order "$CONCAT_ORDER" --seed "$CONCAT_SEED"
    mv -f "$train_pref.$SRC.part" "$train_pref.$SRC"
    mv -f "$train_pref.$TGT.part" "$train_pref.$TGT"  # the target file is the marker
  fi
fi

# 5. binarize with one joined dictionary (needed by --share-all-embeddings)
if [ ! -f "$DATA_BIN/recipe.env" ]; then
  log "binarizing -> $DATA_BIN (fairseq-preprocess --joined-dictionary, $WORKERS workers)"
  rm -rf "$DATA_BIN.tmp" "$DATA_BIN.dict"
  dict_args=()
  if [ "$CONCAT_PAIRS" -gt 1 ]; then
    # the dictionary of the pairs alone (the concatenations add no symbol), so that a model trained
    # with them has the same vocabulary, in the same order, as one trained without
    logged "$PREP_DIR/preprocess.log" -- fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
      --trainpref "$SUB/train" --dict-only --destdir "$DATA_BIN.dict" --joined-dictionary --workers "$WORKERS" \
      || die "fairseq-preprocess failed: see $PREP_DIR/preprocess.log"
    dict_args=(--srcdict "$DATA_BIN.dict/dict.$SRC.txt")
  fi
  logged "$PREP_DIR/preprocess.log" -- fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
    --trainpref "$train_pref" --validpref "$SUB/valid" --testpref "$SUB/test" "${dict_args[@]}" \
    --destdir "$DATA_BIN.tmp" --joined-dictionary --workers "$WORKERS" \
    || die "fairseq-preprocess failed: see $PREP_DIR/preprocess.log"
  { grep -h "replaced (by" "$PREP_DIR/preprocess.log" || true; } | tail -n 6 | sed -E "s/^.*(\[[^]]+\] )/[$STEP] \1/" >&2
  rm -rf "$DATA_BIN.dict"
  cp "$SUB"/codes "$SUB"/spm.model "$DATA_BIN.tmp/" 2>/dev/null || true
  cat > "$DATA_BIN.tmp/recipe.env" <<EOF
RAW_DIR=$RAW_DIR
TOKENIZER=$TOKENIZER
SRC=$SRC
TGT=$TGT
CONCAT_PAIRS=$CONCAT_PAIRS
EOF
  rm -rf "$DATA_BIN"; mv "$DATA_BIN.tmp" "$DATA_BIN"
fi
mark_done "$PREP_DIR" "$SETTINGS"
dict_size=$(( $(line_count "$DATA_BIN/dict.$SRC.txt") + 4 ))
log "done: $DATA_BIN; joint dictionary: $dict_size entries (incl. 4 specials); $subword"
concatenated=""
[ "$CONCAT_PAIRS" -eq 1 ] || concatenated=", $(line_count "$train_pref.$SRC") with the concatenations of $CONCAT_PAIRS"
log "training pairs: $(line_count "$RAW_DIR/train.$SRC") raw, $(line_count "$PREP_DIR/clean/train.$SRC") after cleaning$concatenated"
