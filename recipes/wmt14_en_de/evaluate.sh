#!/usr/bin/env bash
# Step 4: translates the test set with beam 4 / length penalty 0.6 and scores it.
#   RUN_NAME / ARCH  which run (default: rope_transformer_wmt_en_de)
#   CHECKPOINT       default: $WORK_DIR/checkpoints/$RUN_NAME/checkpoint_avg_last5.pt (average.sh)
#   DATA_BIN         default: $WORK_DIR/data-bin; its recipe.env names the raw text and the tokenizer
#   REF              raw reference (default: test.$TGT of the RAW_DIR that prepare.sh used)
#   TEST_SET         name stored with the sacreBLEU signature (default: newstest2014 ... for WMT)
#   BEAM 4, LENPEN 0.6, GEN_SUBSET test, GEN_MAX_TOKENS 8000 (per batch), PRECISION auto
#   BACKEND          fairseq (fairseq-generate, default) or ctranslate2: CHECKPOINT exported with
#                    fairseq-rope-ct2 to CT2_DIR (default: $WORK_DIR/ct2/$RUN_NAME-$CT2_QUANTIZATION),
#                    translated by fairseq-rope-ct2-generate; CT2_QUANTIZATION float32 (or one of
#                    `fairseq-rope-ct2 --list-quantizations`: int8, int16, float16, ...), CT2_DEVICE cpu
#                    (cuda with a GPU), CT2_THREADS 0 (CTranslate2's choice), CT2_BATCH_SIZE 64
#   MODEL_OVERRIDES  model options for translation, as fairseq-generate's --model-overrides, e.g.
#                    "{'rope_scaling': 'linear', 'rope_scaling_factor': 2.0}" (BACKEND=fairseq only)
#   SYSTEM, SEED     recorded in result.json when SYSTEM is set (run.sh: the run's system and training seed,
#                    which fairseq-rope-results and fairseq-rope-compare group seeds by)
#   REFERENCE_NLL    1: also the test NLL by fairseq's own scorer (fairseq-generate --score-reference on
#                    GEN_SUBSET, teacher-forced on the reference: fairseq's nll_loss, bits per target token)
#                    in result.json as test_nll; 0: not scored. BACKEND=fairseq, sentence by sentence only
#   EVAL_DIR         outputs (default: $WORK_DIR/eval/$RUN_NAME, with -ct2-$CT2_QUANTIZATION for
#                    ctranslate2): generate.out, hyps.*, result.json
# Documents (data prepared with CONTEXT=K, recorded in DATA_BIN/recipe.env; or DOCIDS given):
#   DOCIDS           document ids of the raw test set (default with CONTEXT > 0: $GEN_SUBSET.docids beside
#                    REF's source): the test set is translated document by document, each sentence with
#                    the K previous source sentences and the model's own previous translations
#                    (fairseq-rope-doc-translate; K = 0: sentence by sentence, timed per document), and
#                    scored by sentence (BLEU, chrF) and by document (d-BLEU)
#   CONTRASTIVE_JSON a contrastive pronoun test in ContraPro's format, scored with the model in context
#                    (fairseq-rope-contrastive): CONTRASTIVE_TEXT (prefix of its .$SRC/.$TGT text files),
#                    CONTRASTIVE_CONTEXT (prefix of its context files) and CONTRASTIVE_CONTEXT_LINES
#                    (context sentences per line, default 1); accuracy by antecedent distance in result.json
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCH=${ARCH:-rope_transformer_wmt_en_de}
RUN_NAME=${RUN_NAME:-$ARCH}
DATA_BIN=${DATA_BIN:-$WORK_DIR/data-bin}
CHECKPOINT=${CHECKPOINT:-$WORK_DIR/checkpoints/$RUN_NAME/checkpoint_avg_last${AVERAGE_LAST:-5}.pt}
BACKEND=${BACKEND:-fairseq}
one_of BACKEND "$BACKEND" fairseq ctranslate2
CT2_QUANTIZATION=${CT2_QUANTIZATION:-float32}
CT2_DIR=${CT2_DIR:-$WORK_DIR/ct2/$RUN_NAME-$CT2_QUANTIZATION}
CT2_DEVICE=${CT2_DEVICE:-cpu}
CT2_THREADS=${CT2_THREADS:-0}
CT2_BATCH_SIZE=${CT2_BATCH_SIZE:-64}
one_of CT2_DEVICE "$CT2_DEVICE" cpu cuda
need_int CT2_THREADS "$CT2_THREADS"
need_int CT2_BATCH_SIZE "$CT2_BATCH_SIZE" 1
suffix=$([ "$BACKEND" = ctranslate2 ] && echo "-ct2-$CT2_QUANTIZATION" || true)
EVAL_DIR=${EVAL_DIR:-$WORK_DIR/eval/$RUN_NAME$suffix}
BEAM=${BEAM:-4}
LENPEN=${LENPEN:-0.6}
GEN_SUBSET=${GEN_SUBSET:-test}
GEN_MAX_TOKENS=${GEN_MAX_TOKENS:-8000}
PRECISION=${PRECISION:-auto}
MODEL_OVERRIDES=${MODEL_OVERRIDES:-}
REFERENCE_NLL=${REFERENCE_NLL:-1}
one_of REFERENCE_NLL "$REFERENCE_NLL" 0 1
[ -z "$MODEL_OVERRIDES" ] || [ "$BACKEND" = fairseq ] \
  || die "MODEL_OVERRIDES is for BACKEND=fairseq: a CTranslate2 model is exported with its options fixed"
[ -z "$MODEL_OVERRIDES" ] || [[ "$MODEL_OVERRIDES" =~ ^\{.*\}$ ]] \
  || die "MODEL_OVERRIDES must be a Python dict, e.g. \"{'rope_scaling': 'linear', 'rope_scaling_factor': 2.0}\"; got '$MODEL_OVERRIDES'"
need_int BEAM "$BEAM" 1
need_num LENPEN "$LENPEN"
need_int GEN_MAX_TOKENS "$GEN_MAX_TOKENS" 1
[ "$PRECISION" != bf16 ] || die "PRECISION=bf16 is not supported: fairseq-generate 0.12 ignores --bf16 and would \
translate in fp32; use PRECISION=fp16 or fp32 (or BACKEND=ctranslate2 with CT2_QUANTIZATION=bfloat16)"
one_of PRECISION "$PRECISION" auto fp16 fp32
need_file "$DATA_BIN/recipe.env" "DATA_BIN/recipe.env (run prepare.sh first)"
need_file "$CHECKPOINT" "CHECKPOINT (run train.sh and average.sh first)"
need_cmd fairseq-generate "pip install fairseq-fixed"
[ "$BACKEND" = fairseq ] || need_cmd fairseq-rope-ct2 "$ROPE_HINT"
if [ "$BACKEND" = ctranslate2 ]; then  # the values fairseq-rope-ct2 accepts (the list is defined there only)
  # shellcheck disable=SC2046
  one_of CT2_QUANTIZATION "$CT2_QUANTIZATION" $(fairseq-rope-ct2 --list-quantizations)
fi
[ "$BACKEND" = fairseq ] || "$PYTHON" -c "import ctranslate2" 2>/dev/null \
  || die "BACKEND=ctranslate2 needs the ctranslate2 package: pip install 'fairseq-rope[ct2]'"
need_cmd fairseq-rope-score "$ROPE_HINT"
need_cmd fairseq-rope-checkpoint "$ROPE_HINT"
need_cmd fairseq-rope-progress "$ROPE_HINT"
check_plugin

env_of() { sed -n "s/^$1=//p" "$DATA_BIN/recipe.env"; }
CONTEXT=$(env_of CONTEXT)
CONTEXT=${CONTEXT:-0}
TOKENIZER=$(env_of TOKENIZER)
PRETOKENIZER=$(env_of PRETOKENIZER)
PRETOKENIZER=${PRETOKENIZER:-moses}  # (data-bins made before PRETOKENIZER existed were Moses-tokenized)
REF=${REF:-$(env_of RAW_DIR)/$GEN_SUBSET.$TGT}
need_file "$REF" "raw reference REF"
if [ -z "${TEST_SET:-}" ]; then
  case $(env_of RAW_DIR) in "$(cd "$WORK_DIR" 2>/dev/null && pwd)/raw") TEST_SET="newstest2014 full (sacrebleu wmt14/full, en-de, 3003 sentences)" ;;
    *) TEST_SET="$REF" ;; esac
fi
remove_bpe=$([ "$TOKENIZER" = spm ] && echo sentencepiece || echo "@@ ")
DOCIDS=${DOCIDS:-$([ "$CONTEXT" -eq 0 ] || echo "$(env_of RAW_DIR)/$GEN_SUBSET.docids")}
CONTRASTIVE_JSON=${CONTRASTIVE_JSON:-}
if [ -n "$DOCIDS" ]; then
  need_file "$DOCIDS" "DOCIDS (the document ids of $(env_of RAW_DIR)/$GEN_SUBSET.$SRC)"
  [ "$BACKEND" = fairseq ] || die "documents (CONTEXT=$CONTEXT, DOCIDS=$DOCIDS) are translated with BACKEND=fairseq only"
  need_cmd fairseq-rope-doc-translate "$ROPE_HINT"
fi
# without_info: stderr of the document commands without fairseq's INFO lines and warnings (on stderr)
without_info() { grep -v "^INFO:\|Warning\|warnings.warn" >&2 || true; }
# the text of documents and of the pronoun test is preprocessed as DATA_BIN/preprocessing.json records
# (pretokenizer, subwords, context); the document commands and the CTranslate2 export read it there
model_args=(--checkpoint "$CHECKPOINT" --data-bin "$DATA_BIN" --device "$([ "$(detect_gpus)" -gt 0 ] && echo cuda || echo cpu)")
[ -z "$MODEL_OVERRIDES" ] || model_args+=(--model-overrides "$MODEL_OVERRIDES")
NGPU=$(detect_gpus)
if [ "$PRECISION" = auto ]; then PRECISION=$([ "$NGPU" -gt 0 ] && echo fp16 || echo fp32); fi
device_args=()
[ "$PRECISION" != fp16 ] || device_args+=(--fp16)
[ "$NGPU" -gt 0 ] || device_args+=(--cpu)
# fairseq-generate's arguments for this checkpoint and subset, for the translation and the reference scores
generate_args=("$DATA_BIN" --user-dir "$USER_DIR" --path "$CHECKPOINT" --gen-subset "$GEN_SUBSET"
               --required-batch-size-multiple 1 --max-tokens "$GEN_MAX_TOKENS" "${device_args[@]}")
[ -z "$MODEL_OVERRIDES" ] || generate_args+=(--model-overrides "$MODEL_OVERRIDES")

mkdir -p "$EVAL_DIR"
GEN=$EVAL_DIR/generate.out
if [ "$BACKEND" = ctranslate2 ]; then
  if [ -f "$CT2_DIR/model.bin" ] && [ "$CT2_DIR/model.bin" -nt "$CHECKPOINT" ]; then
    log "CTranslate2 model up to date: $CT2_DIR"
  else
    log "exporting $CHECKPOINT to CTranslate2 ($CT2_QUANTIZATION weights) -> $CT2_DIR"
    fairseq-rope-ct2 --checkpoint "$CHECKPOINT" --data-bin "$DATA_BIN" --output-dir "$CT2_DIR" \
      --quantization "$CT2_QUANTIZATION" --force
  fi
  translated_by=$CT2_DIR/model.bin
else
  translated_by=$CHECKPOINT
fi
gen_settings="$translated_by beam=$BEAM lenpen=$LENPEN subset=$GEN_SUBSET overrides=$MODEL_OVERRIDES precision=$PRECISION"
[ -z "$DOCIDS" ] || gen_settings="$gen_settings docids=$DOCIDS context=$CONTEXT"
if [ -f "$GEN" ] && [ "$GEN" -nt "$translated_by" ] && [ "$(cat "$GEN.settings" 2>/dev/null)" = "$gen_settings" ] \
    && { [ "$BACKEND" = fairseq ] && [ -z "$DOCIDS" ] || [ -f "$GEN.info.json" ]; }; then
  log "translations up to date: $GEN"
elif [ -n "$DOCIDS" ]; then
  log "translating the documents of $(env_of RAW_DIR)/$GEN_SUBSET.$SRC ($DOCIDS), context $CONTEXT, beam $BEAM -> $GEN"
  fairseq-rope-doc-translate "${model_args[@]}" --input "$(env_of RAW_DIR)/$GEN_SUBSET.$SRC" --docids "$DOCIDS" \
    --beam "$BEAM" --lenpen "$LENPEN" --output "$EVAL_DIR/hyps.documents.$TGT" --generate-output "$GEN" \
    --info-json "$GEN.info.json" 2> >(without_info)
elif [ "$BACKEND" = ctranslate2 ]; then
  log "translating $GEN_SUBSET with CTranslate2 ($CT2_DIR, $CT2_DEVICE, beam $BEAM, lenpen $LENPEN) -> $GEN"
  run_to "$GEN" fairseq-rope-ct2-generate "$CT2_DIR" --data-bin "$DATA_BIN" --gen-subset "$GEN_SUBSET" \
    --beam "$BEAM" --lenpen "$LENPEN" --remove-bpe "$remove_bpe" --device "$CT2_DEVICE" \
    --threads "$CT2_THREADS" --batch-size "$CT2_BATCH_SIZE" --info-json "$GEN.info.json"
  tail -n 1 "$GEN" | sed "s/^/[$STEP] /" >&2
else
  log "translating $GEN_SUBSET with $CHECKPOINT (beam $BEAM, lenpen $LENPEN) -> $EVAL_DIR/{generate.out,generate.log}"
  if ! logged "$EVAL_DIR/generate.log" --stdout "$GEN" --total "$(line_count "$REF")" -- \
      fairseq-generate "${generate_args[@]}" --beam "$BEAM" --lenpen "$LENPEN" --remove-bpe "$remove_bpe"; then
    # fairseq's errors for a damaged checkpoint or other dictionaries name neither file: say which
    fairseq-rope-checkpoint fits "$CHECKPOINT" --data-bin "$DATA_BIN" --source-lang "$SRC" --target-lang "$TGT" \
      > /dev/null || true
    die "cannot translate with $CHECKPOINT (see above)"
  fi
fi
echo "$gen_settings" > "$GEN.settings.tmp" && mv -f "$GEN.settings.tmp" "$GEN.settings"
nll_args=()
if [ "$REFERENCE_NLL" = 1 ] && [ "$BACKEND" = fairseq ] && [ -z "$DOCIDS" ]; then
  SCORED=$EVAL_DIR/score_reference.out
  nll_settings="$CHECKPOINT subset=$GEN_SUBSET overrides=$MODEL_OVERRIDES precision=$PRECISION"
  if [ -f "$SCORED" ] && [ "$SCORED" -nt "$CHECKPOINT" ] && [ "$(cat "$SCORED.settings" 2>/dev/null)" = "$nll_settings" ]; then
    log "reference scores up to date: $SCORED"
  else
    log "the test NLL: the references of $GEN_SUBSET scored by fairseq-generate --score-reference -> $SCORED"
    run_to "$SCORED" fairseq-generate "${generate_args[@]}" --score-reference 2> "$EVAL_DIR/score_reference.log" \
      || { tail -n 5 "$EVAL_DIR/score_reference.log" >&2; die "cannot score the references with $CHECKPOINT (log: $EVAL_DIR/score_reference.log)"; }
    echo "$nll_settings" > "$SCORED.settings.tmp" && mv -f "$SCORED.settings.tmp" "$SCORED.settings"
  fi
  nll_args=(--reference-scores "$SCORED")
fi
fields=(--set "beam=$BEAM" --set "lenpen=$LENPEN" --set "subset=$GEN_SUBSET" --set "tokenizer=$TOKENIZER" --set "backend=$BACKEND")
if [ -n "$DOCIDS" ]; then fields+=(--docids "$DOCIDS" --extra-file "$GEN.info.json"); fi
if [ -n "$CONTRASTIVE_JSON" ]; then
  CONTRASTIVE_TEXT=${CONTRASTIVE_TEXT:?CONTRASTIVE_JSON needs CONTRASTIVE_TEXT, the prefix of its .$SRC/.$TGT text files}
  CONTRASTIVE_CONTEXT_LINES=${CONTRASTIVE_CONTEXT_LINES:-1}
  out=$EVAL_DIR/contrastive.json
  settings="$CHECKPOINT $CONTRASTIVE_JSON $CONTRASTIVE_TEXT ${CONTRASTIVE_CONTEXT:-} $CONTRASTIVE_CONTEXT_LINES context=$CONTEXT"
  if [ -f "$out" ] && [ "$out" -nt "$CHECKPOINT" ] && [ "$(cat "$out.settings" 2>/dev/null)" = "$settings" ]; then
    log "pronoun test up to date: $out"
  else
    log "scoring the pronoun test $CONTRASTIVE_JSON in context ($CONTEXT sentences) -> $out"
    context_files=()
    [ "$CONTEXT" -eq 0 ] || context_files=(--context-text "${CONTRASTIVE_CONTEXT:?CONTEXT=$CONTEXT needs CONTRASTIVE_CONTEXT}"
      --context-lines "$CONTRASTIVE_CONTEXT_LINES")
    fairseq-rope-contrastive "${model_args[@]}" --json "$CONTRASTIVE_JSON" --text "$CONTRASTIVE_TEXT" \
      "${context_files[@]}" --source-lang "$SRC" --target-lang "$TGT" --scores "$EVAL_DIR/contrastive.scores" \
      --out-json "$out" 2> >(without_info)
    echo "$settings" > "$out.settings.tmp" && mv -f "$out.settings.tmp" "$out.settings"
  fi
  fields+=(--extra-file "$out")
fi
[ -z "$MODEL_OVERRIDES" ] || fields+=(--set "model_overrides=$MODEL_OVERRIDES")
# the model's size as fairseq-train counted it (its train.log beside the checkpoint, where train.sh writes it)
parameters=$(sed -n 's/.*num\. shared model params: \([0-9,]*\).*/\1/p' "$(dirname "$CHECKPOINT")/train.log" 2>/dev/null \
  | tail -n 1 | tr -d ,)
[ -z "$parameters" ] || fields+=(--set "parameters=$parameters")
[ -z "${SYSTEM:-}" ] || fields+=(--set "system=$SYSTEM" --set "seed=${SEED:?SYSTEM=$SYSTEM needs SEED (the training seed of the run)}")
if [ "$BACKEND" = ctranslate2 ]; then  # the compute type CTranslate2 used: from the info fairseq-rope-ct2-generate wrote
  fields+=(--set "ct2_dir=$CT2_DIR" --set "ct2_quantization=$CT2_QUANTIZATION" --extra-file "$GEN.info.json")
fi
fairseq-rope-score --generate-output "$GEN" --ref "$REF" --lang "$TGT" --tokenization "$PRETOKENIZER" \
  --out-dir "$EVAL_DIR" --arch "$ARCH" --run-name "$RUN_NAME" --checkpoint "$CHECKPOINT" --test-set "$TEST_SET" \
  "${fields[@]}" "${nll_args[@]}"
