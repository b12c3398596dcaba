#!/usr/bin/env bash
# Step 1: data. Raw text -> Moses tokenization -> cleaning -> joint subwords [-> concatenated pairs] -> fairseq binaries.
# Each of these can be yours instead: text already tokenized, a subword model, fairseq dictionaries.
#
#   RAW_DIR      directory with train/valid/test.{en,de} plain text. Unset: download WMT14 En-De
#                (download.sh) into $WORK_DIR/raw.
#   WORK_DIR     work directory (default: <repo>/work/wmt14_en_de)
#   PREP_DIR     intermediate text (default: $WORK_DIR/prep)
#   DATA_BIN     fairseq-preprocess output (default: $WORK_DIR/data-bin)
#   PRETOKENIZER moses (default: sacremoses' normalize-punctuation + tokenize -a) or none (the text is
#                used as it is: already tokenized, or raw text for sentencepiece); evaluate.sh then
#                scores without Moses detokenization
#   TOKENIZER    bpe (subword-nmt, default) or spm (sentencepiece)
#   BPE_CODES    existing subword-nmt codes to apply instead of learning new ones (TOKENIZER=bpe),
#                e.g. those of a model trained elsewhere
#   SPM_MODEL    an existing sentencepiece model to apply instead of training one (TOKENIZER=spm)
#   SRCDICT, TGTDICT  existing fairseq dictionaries (fairseq-preprocess --srcdict/--tgtdict), e.g. a
#                trained model's dict.<lang>.txt; one file for both (or SRCDICT alone): a joined dictionary
#   JOINED_DICTIONARY 1 (default: one dictionary for both languages, the paper's, needed by
#                --share-all-embeddings) or 0 (one per language; train.sh then shares only the decoder's
#                input and output embeddings)
#   BPE_MERGES   joint BPE merge operations (default 37000, aiming at the paper's ~37k joint
#                vocabulary; the dictionary size is printed at the end: it is merges + characters
#                minus merge intermediates no longer used, so only approximately 37k)
#   BPE_VOCAB_THRESHOLD  subword-nmt --vocabulary-threshold when applying BPE (default 50)
#   SPM_VOCAB_SIZE (37000), SPM_MODEL_TYPE (unigram|bpe), SPM_INPUT_SENTENCES (10000000)
#   CLEAN_MIN / CLEAN_MAX / CLEAN_RATIO  training pair filter, tokens (default 1 / 250 / 1.5)
#   CONCAT_PAIRS 1 (off). K >= 2: the training data also holds concatenations of K training pairs
#                (fairseq-rope-prep concat-pairs, after the subwords), so that long inputs are seen
#   CONCAT_ORDER consecutive (pairs 1..K, K+1..2K, ...) or random (a permutation drawn with CONCAT_SEED, 1)
#   CONTEXT      0 (sentence-level). K >= 1: document-level data: every pair joined with up to K previous
#                pairs of its document on both sides (" <sep> " between sentences; fairseq-rope-prep
#                context), for train, valid and test. Needs $RAW_DIR/{train,valid,test}.docids (one
#                document id per line, a document's lines consecutive)
#   CONTEXT_KEEP_SENTENCES 0 (default: each training pair once, with its context) or 1 (also every
#                pair that had context on its own)
#   WORKERS      parallel processes (default: number of CPUs)
# Every output is written to a temporary name and renamed when complete; a re-run skips
# finished files, continues unfinished ones, and stops with an error if $PREP_DIR was made with
# other settings.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TOKENIZER=${TOKENIZER:-bpe}
PRETOKENIZER=${PRETOKENIZER:-moses}
BPE_CODES=${BPE_CODES:-}
SPM_MODEL=${SPM_MODEL:-}
SRCDICT=${SRCDICT:-}
TGTDICT=${TGTDICT:-${SRCDICT}}
JOINED_DICTIONARY=${JOINED_DICTIONARY:-1}
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
CONTEXT=${CONTEXT:-0}
CONTEXT_KEEP_SENTENCES=${CONTEXT_KEEP_SENTENCES:-0}
WORKERS=${WORKERS:-$(nproc 2>/dev/null || echo 1)}
PREP_DIR=${PREP_DIR:-$WORK_DIR/prep}
DATA_BIN=${DATA_BIN:-$WORK_DIR/data-bin}

one_of TOKENIZER "$TOKENIZER" bpe spm
one_of PRETOKENIZER "$PRETOKENIZER" moses none
one_of JOINED_DICTIONARY "$JOINED_DICTIONARY" 1 0
[ -z "$BPE_CODES" ] || [ "$TOKENIZER" = bpe ] || die "BPE_CODES is for TOKENIZER=bpe (subword-nmt); got TOKENIZER=$TOKENIZER"
[ -z "$SPM_MODEL" ] || [ "$TOKENIZER" = spm ] || die "SPM_MODEL is for TOKENIZER=spm (sentencepiece); got TOKENIZER=$TOKENIZER"
for v in BPE_CODES SPM_MODEL SRCDICT TGTDICT; do
  [ -z "${!v}" ] || need_file "${!v}" "$v"
  [ -z "${!v}" ] || printf -v "$v" '%s' "$(cd "$(dirname "${!v}")" && pwd)/$(basename "${!v}")"
done
[ -n "$SRCDICT" ] || [ -z "${TGTDICT}" ] || die "TGTDICT needs SRCDICT (the source dictionary) as well"
if [ -n "$SRCDICT" ] && ! cmp -s "$SRCDICT" "$TGTDICT"; then
  [ "$JOINED_DICTIONARY" = 0 ] || die "SRCDICT=$SRCDICT and TGTDICT=$TGTDICT differ: a joined dictionary \
needs one file; set JOINED_DICTIONARY=0 for one dictionary per language"
fi
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
need_int CONTEXT "$CONTEXT" 0
one_of CONTEXT_KEEP_SENTENCES "$CONTEXT_KEEP_SENTENCES" 0 1
[ "$CONTEXT" -eq 0 ] || [ "$CONCAT_PAIRS" -eq 1 ] \
  || die "CONTEXT=$CONTEXT and CONCAT_PAIRS=$CONCAT_PAIRS: choose one (documents give long inputs by themselves)"
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
if [ "$CONTEXT" -gt 0 ]; then
  for split in train valid test; do
    [ -f "$RAW_DIR/$split.docids" ] || die "CONTEXT=$CONTEXT needs document ids: $RAW_DIR/$split.docids not found \
(one id per line of $split.$SRC; WMT's .sgm test sets have them, see the recipe README)"
    [ "$(line_count "$RAW_DIR/$split.docids")" = "$(line_count "$RAW_DIR/$split.$SRC")" ] \
      || die "$RAW_DIR/$split.docids has $(line_count "$RAW_DIR/$split.docids") lines, $RAW_DIR/$split.$SRC has \
$(line_count "$RAW_DIR/$split.$SRC"): one document id per sentence line"
  done
  for dict in "$SRCDICT" "$TGTDICT"; do
    [ -z "$dict" ] || grep -q '^<sep> ' "$dict" || die "CONTEXT=$CONTEXT joins sentences with <sep>, which $dict \
does not hold: add a line '<sep> 1' to it (a model trained with it then learns its embedding)"
  done
fi

if [ -n "$BPE_CODES" ]; then subword="bpe codes=$BPE_CODES:$(cksum < "$BPE_CODES" | cut -d' ' -f1)"
elif [ -n "$SPM_MODEL" ]; then subword="spm model=$SPM_MODEL:$(cksum < "$SPM_MODEL" | cut -d' ' -f1)"
elif [ "$TOKENIZER" = bpe ]; then subword="bpe merges=$BPE_MERGES vocabulary-threshold=$BPE_VOCAB_THRESHOLD"
else subword="spm vocab=$SPM_VOCAB_SIZE type=$SPM_MODEL_TYPE input-sentences=$SPM_INPUT_SENTENCES"; fi
if [ -n "$SRCDICT" ]; then dictionary="given src=$SRCDICT:$(cksum < "$SRCDICT" | cut -d' ' -f1) tgt=$TGTDICT:$(cksum < "$TGTDICT" | cut -d' ' -f1)"
else dictionary="joined=$JOINED_DICTIONARY"; fi
pretokenizer=$([ "$PRETOKENIZER" = moses ] && echo sacremoses-normalize+tokenize-a-noescape || echo none)
SETTINGS="raw=$RAW_DIR $(for s in train valid test; do for l in $SRC $TGT; do
  printf '%s.%s:%s ' $s $l "$(wc -c < "$RAW_DIR/$s.$l" | tr -d ' ')"; done; done)
tokenizer=$pretokenizer clean=$CLEAN_MIN-$CLEAN_MAX,ratio=$CLEAN_RATIO
subword=$subword dictionary=$dictionary"
if [ "$CONCAT_PAIRS" -gt 1 ]; then
  SETTINGS="$SETTINGS concat=$CONCAT_PAIRS,$CONCAT_ORDER"
  [ "$CONCAT_ORDER" != random ] || SETTINGS="$SETTINGS,seed=$CONCAT_SEED"
fi
if [ "$CONTEXT" -gt 0 ]; then
  SETTINGS="$SETTINGS context=$CONTEXT,keep-sentences=$CONTEXT_KEEP_SENTENCES docids=$(for s in train valid test; do
    printf '%s:%s ' $s "$(cksum < "$RAW_DIR/$s.docids" | cut -d' ' -f1)"; done)"
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

# 2. normalize punctuation + tokenize (Moses rules via sacremoses, in parallel), or (PRETOKENIZER=none) as it is
mkdir -p "$PREP_DIR/tok"
if [ "$PRETOKENIZER" = moses ]; then
  log "tokenizing $RAW_DIR/{train,valid,test}.{$SRC,$TGT} -> $PREP_DIR/tok ($WORKERS workers)"
else
  log "PRETOKENIZER=none: $RAW_DIR/{train,valid,test}.{$SRC,$TGT} used as they are (copied to $PREP_DIR/tok)"
fi
for lang in $SRC $TGT; do
  inputs=(); outputs=()
  for split in train valid test; do
    out=$PREP_DIR/tok/$split.$lang
    [ ! -f "$out" ] || continue
    if [ "$PRETOKENIZER" = moses ]; then
      inputs+=("$RAW_DIR/$split.$lang"); outputs+=("$out")
    else
      cp "$RAW_DIR/$split.$lang" "$out.tmp" && mv -f "$out.tmp" "$out"
    fi
  done
  [ ${#inputs[@]} -gt 0 ] || continue
  # the splits of a language in one process: sacremoses is set up once (a second per process)
  quietly "$PREP_DIR/prepare.log" fairseq-rope-prep tokenize --lang "$lang" -i "${inputs[@]}" -o "${outputs[@]}" \
    --workers "$WORKERS"
  # empty lines are kept (so that test lines stay aligned with their references) and said here
  { tail -n "${#inputs[@]}" "$PREP_DIR/prepare.log" | grep "empty, kept" | sed "s/^\[[^]]*\] ([a-z]*) /[$STEP] /" >&2; } || true
done

# 3. clean the training pairs (length 1-250 tokens, ratio 1.5, as Moses clean-corpus-n)
mkdir -p "$PREP_DIR/clean"
if [ ! -f "$PREP_DIR/clean/train.$TGT" ]; then
  log "cleaning training pairs -> $PREP_DIR/clean/train.{$SRC,$TGT} (what was removed: $PREP_DIR/prepare.log)"
  docids=()  # (CONTEXT > 0) the ids of the pairs kept: a dropped pair leaves its document without it
  [ "$CONTEXT" -eq 0 ] || docids=(--docids "$RAW_DIR/train.docids" --out-docids "$PREP_DIR/clean/train.docids")
  quietly "$PREP_DIR/prepare.log" fairseq-rope-prep clean --src "$PREP_DIR/tok/train.$SRC" --tgt "$PREP_DIR/tok/train.$TGT" \
    --out-src "$PREP_DIR/clean/train.$SRC.part" --out-tgt "$PREP_DIR/clean/train.$TGT.part" \
    --min "$CLEAN_MIN" --max "$CLEAN_MAX" --ratio "$CLEAN_RATIO" "${docids[@]}"
  tail -n 1 "$PREP_DIR/prepare.log" | sed -n "s/^.*: \(kept [0-9]* of [0-9]* pairs.*\) -> .*$/[$STEP] \1/p" >&2
  mv -f "$PREP_DIR/clean/train.$SRC.part" "$PREP_DIR/clean/train.$SRC"
  mv -f "$PREP_DIR/clean/train.$TGT.part" "$PREP_DIR/clean/train.$TGT"  # the target file is the marker
fi
check_parallel "$PREP_DIR/clean/train"

# 4. joint subword model, learned on the cleaned training text of both languages
SUB=$PREP_DIR/$TOKENIZER
mkdir -p "$SUB"
input_of() { [ "$1" = train ] && echo "$PREP_DIR/clean/train.$2" || echo "$PREP_DIR/tok/$1.$2"; }
vocabulary=()  # subword-nmt's vocabulary filter: only with codes learned here (and their vocabularies)
record=()      # the subword model, as fairseq-rope-prep record takes it
# a given subword model (BPE_CODES or SPM_MODEL: only the one of TOKENIZER may be set) takes the place of
# the one this step would learn
given=$([ "$TOKENIZER" = bpe ] && echo "$BPE_CODES" || echo "$SPM_MODEL")
model=$SUB/$([ "$TOKENIZER" = bpe ] && echo codes || echo spm.model)
if [ -n "$given" ] && [ ! -f "$model" ]; then
  log "$([ "$TOKENIZER" = bpe ] && echo BPE_CODES || echo SPM_MODEL): applying $given (none learned) -> $model"
  cp "$given" "$model.tmp" && mv -f "$model.tmp" "$model"
fi
if [ "$TOKENIZER" = bpe ]; then
  if [ ! -f "$SUB/codes" ]; then
    log "learning $BPE_MERGES joint BPE merges -> $SUB/codes"
    subword-nmt learn-joint-bpe-and-vocab --input "$PREP_DIR/clean/train.$SRC" "$PREP_DIR/clean/train.$TGT" \
      -s "$BPE_MERGES" -o "$SUB/codes.tmp" --write-vocabulary "$SUB/vocab.$SRC.tmp" "$SUB/vocab.$TGT.tmp" \
      2>&1 | tr '\r' '\n' | grep -v '^ *$' | tail -n 1 > "$PREP_DIR/learn-bpe.log"  # its progress bar, last state
    mv -f "$SUB/vocab.$SRC.tmp" "$SUB/vocab.$SRC"; mv -f "$SUB/vocab.$TGT.tmp" "$SUB/vocab.$TGT"
    mv -f "$SUB/codes.tmp" "$SUB/codes"
  fi
  [ -n "$BPE_CODES" ] || vocabulary=(--bpe-vocabulary "$SUB/vocab.$SRC" "$SUB/vocab.$TGT"
    --bpe-vocabulary-threshold "$BPE_VOCAB_THRESHOLD")
  record=(--bpe-codes "$SUB/codes" "${vocabulary[@]}")
else
  if [ ! -f "$SUB/spm.model" ]; then
    log "training a joint sentencepiece $SPM_MODEL_TYPE model, vocabulary $SPM_VOCAB_SIZE -> $SUB/spm.model"
    fairseq-rope-prep spm-train --inputs "$PREP_DIR/clean/train.$SRC" "$PREP_DIR/clean/train.$TGT" \
      --model-prefix "$SUB/spm" --vocab-size "$SPM_VOCAB_SIZE" --model-type "$SPM_MODEL_TYPE" \
      --input-sentence-size "$SPM_INPUT_SENTENCES" --threads "$WORKERS"
  fi
  record=(--sentencepiece-model "$SUB/spm.model")
fi
# the record of this preprocessing (fairseq_rope_text.preprocessing), written with the data-bin in step 6;
# the subwords of every split are made by it, as every way into the model applies it
record=(--source-lang "$SRC" --target-lang "$TGT" --pretokenizer "$PRETOKENIZER" "${record[@]}" --context "$CONTEXT")
quietly "$PREP_DIR/prepare.log" fairseq-rope-prep record --dir "$SUB" "${record[@]}"
log "subwords as $SUB/preprocessing.json records them -> $SUB/{train,valid,test}.{$SRC,$TGT}"
for lang in $SRC $TGT; do
  inputs=(); outputs=()
  for split in train valid test; do
    out=$SUB/$split.$lang
    [ -f "$out" ] && continue
    inputs+=("$(input_of $split $lang)"); outputs+=("$out")
  done
  [ ${#inputs[@]} -eq 0 ] || quietly "$PREP_DIR/prepare.log" fairseq-rope-prep subwords --record "$SUB" \
    --lang "$lang" -i "${inputs[@]}" -o "${outputs[@]}" --workers "$WORKERS"
done
for split in train valid test; do check_parallel "$SUB/$split"; done

# 5. (CONCAT_PAIRS=K) the training pairs and concatenations of K of them
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

# 5b. (CONTEXT=K) every pair with up to K previous pairs of its document, train, valid and test
valid_pref=$SUB/valid test_pref=$SUB/test
if [ "$CONTEXT" -gt 0 ]; then
  log "joining every pair with up to $CONTEXT previous pairs of its document -> $SUB/{train,valid,test}.context$CONTEXT.*"
  for split in train valid test; do
    pref=$SUB/$split.context$CONTEXT
    ids=$([ $split = train ] && echo "$PREP_DIR/clean/train.docids" || echo "$RAW_DIR/$split.docids")
    keep=(); [ $split != train ] || [ "$CONTEXT_KEEP_SENTENCES" = 0 ] || keep=(--keep-sentences)
    if [ ! -f "$pref.$TGT" ]; then
      quietly "$PREP_DIR/prepare.log" fairseq-rope-prep context --src "$SUB/$split.$SRC" --tgt "$SUB/$split.$TGT" \
        --docids "$ids" \
        --out-src "$pref.$SRC.part" --out-tgt "$pref.$TGT.part" -k "$CONTEXT" "${keep[@]}"
      mv -f "$pref.$SRC.part" "$pref.$SRC"
      mv -f "$pref.$TGT.part" "$pref.$TGT"  # the target file is the marker
    fi
  done
  train_pref=$SUB/train.context$CONTEXT valid_pref=$SUB/valid.context$CONTEXT test_pref=$SUB/test.context$CONTEXT
fi

# 6. binarize with one joined dictionary (needed by --share-all-embeddings), one per language, or the given ones
if [ ! -f "$DATA_BIN/recipe.env" ]; then
  rm -rf "$DATA_BIN.tmp" "$DATA_BIN.dict"
  dict_args=()
  [ "$JOINED_DICTIONARY" = 0 ] || dict_args=(--joined-dictionary)
  if [ -n "$SRCDICT" ]; then
    dict_args+=(--srcdict "$SRCDICT")
    [ "$JOINED_DICTIONARY" = 1 ] || dict_args+=(--tgtdict "$TGTDICT")
  fi
  log "binarizing -> $DATA_BIN (fairseq-preprocess ${dict_args[*]:-(a dictionary per language)}, $WORKERS workers)"
  if [ "$CONCAT_PAIRS" -gt 1 ] && [ -z "$SRCDICT" ]; then
    # the dictionary of the pairs alone (the concatenations add no symbol), so that a model trained
    # with them has the same vocabulary, in the same order, as one trained without
    logged "$PREP_DIR/preprocess.log" -- fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
      --trainpref "$SUB/train" --dict-only --destdir "$DATA_BIN.dict" "${dict_args[@]}" --workers "$WORKERS" \
      || die "fairseq-preprocess failed: see $PREP_DIR/preprocess.log"
    dict_args+=(--srcdict "$DATA_BIN.dict/dict.$SRC.txt")
    [ "$JOINED_DICTIONARY" = 1 ] || dict_args+=(--tgtdict "$DATA_BIN.dict/dict.$TGT.txt")
  fi
  logged "$PREP_DIR/preprocess.log" -- fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
    --trainpref "$train_pref" --validpref "$valid_pref" --testpref "$test_pref" "${dict_args[@]}" \
    --destdir "$DATA_BIN.tmp" --workers "$WORKERS" \
    || die "fairseq-preprocess failed: see $PREP_DIR/preprocess.log"
  # the share of tokens fairseq-preprocess replaced by <unk>, per file where it is not 0
  replaced=$({ grep -h "replaced (by" "$PREP_DIR/preprocess.log" || true; } | tail -n 6 \
    | sed -E 's/^.*\] (.*\/)?([^/:]+): .* ([0-9.]+)% replaced.*$/\2 \3%/' | { grep -v ' 0\.0%$' || true; })
  if [ -z "$replaced" ]; then log "no token replaced by <unk> (fairseq-preprocess: $PREP_DIR/preprocess.log)"
  else log "tokens replaced by <unk>: $(echo "$replaced" | paste -sd ';' - | sed 's/;/; /g')"; fi
  rm -rf "$DATA_BIN.dict"
  quietly "$PREP_DIR/prepare.log" fairseq-rope-prep record --dir "$DATA_BIN.tmp" "${record[@]}"
  cat > "$DATA_BIN.tmp/recipe.env" <<EOF
RAW_DIR=$RAW_DIR
TOKENIZER=$TOKENIZER
PRETOKENIZER=$PRETOKENIZER
SRC=$SRC
TGT=$TGT
CONCAT_PAIRS=$CONCAT_PAIRS
CONTEXT=$CONTEXT
EOF
  rm -rf "$DATA_BIN"; mv "$DATA_BIN.tmp" "$DATA_BIN"
fi
mark_done "$PREP_DIR" "$SETTINGS"
dict_size=$(( $(line_count "$DATA_BIN/dict.$SRC.txt") + 4 ))
if cmp -s "$DATA_BIN/dict.$SRC.txt" "$DATA_BIN/dict.$TGT.txt"; then
  log "done: $DATA_BIN; joint dictionary: $dict_size entries (incl. 4 specials); $subword"
else
  log "done: $DATA_BIN; dictionaries: $SRC $dict_size, $TGT $(( $(line_count "$DATA_BIN/dict.$TGT.txt") + 4 )) entries (incl. 4 specials); $subword"
fi
concatenated=""
[ "$CONCAT_PAIRS" -eq 1 ] || concatenated=", $(line_count "$train_pref.$SRC") with the concatenations of $CONCAT_PAIRS"
[ "$CONTEXT" -eq 0 ] || concatenated=", $(line_count "$train_pref.$SRC") examples with up to $CONTEXT previous sentences"
log "training pairs: $(line_count "$RAW_DIR/train.$SRC") raw, $(line_count "$PREP_DIR/clean/train.$SRC") after cleaning$concatenated"
