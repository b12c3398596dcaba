#!/usr/bin/env bash
# Step 4: translates the test set with beam 4 / length penalty 0.6 and scores it.
#   RUN_NAME / ARCH  which run (default: rope_transformer_wmt_en_de)
#   CHECKPOINT       default: $WORK_DIR/checkpoints/$RUN_NAME/checkpoint_avg_last5.pt (average.sh)
#   DATA_BIN         default: $WORK_DIR/data-bin; its recipe.env names the raw text and the tokenizer
#   REF              raw reference (default: test.$TGT of the RAW_DIR that prepare.sh used)
#   TEST_SET         name stored with the sacreBLEU signature (default: newstest2014 ... for WMT)
#   BEAM 4, LENPEN 0.6, GEN_SUBSET test, GEN_MAX_TOKENS 8000 (per batch), PRECISION auto
#   EVAL_DIR         outputs (default: $WORK_DIR/eval/$RUN_NAME): generate.out, hyps.*, result.json
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCH=${ARCH:-rope_transformer_wmt_en_de}
RUN_NAME=${RUN_NAME:-$ARCH}
DATA_BIN=${DATA_BIN:-$WORK_DIR/data-bin}
CHECKPOINT=${CHECKPOINT:-$WORK_DIR/checkpoints/$RUN_NAME/checkpoint_avg_last${AVERAGE_LAST:-5}.pt}
EVAL_DIR=${EVAL_DIR:-$WORK_DIR/eval/$RUN_NAME}
BEAM=${BEAM:-4}
LENPEN=${LENPEN:-0.6}
GEN_SUBSET=${GEN_SUBSET:-test}
GEN_MAX_TOKENS=${GEN_MAX_TOKENS:-8000}
PRECISION=${PRECISION:-auto}
need_int BEAM "$BEAM" 1
need_num LENPEN "$LENPEN"
need_int GEN_MAX_TOKENS "$GEN_MAX_TOKENS" 1
one_of PRECISION "$PRECISION" auto fp16 bf16 fp32
need_file "$DATA_BIN/recipe.env" "DATA_BIN/recipe.env (run prepare.sh first)"
need_file "$CHECKPOINT" "CHECKPOINT (run train.sh and average.sh first)"
need_cmd fairseq-generate "pip install fairseq-fixed"
need_cmd fairseq-rope-score "$ROPE_HINT"
check_plugin

env_of() { sed -n "s/^$1=//p" "$DATA_BIN/recipe.env"; }
TOKENIZER=$(env_of TOKENIZER)
REF=${REF:-$(env_of RAW_DIR)/$GEN_SUBSET.$TGT}
need_file "$REF" "raw reference REF"
if [ -z "${TEST_SET:-}" ]; then
  case $(env_of RAW_DIR) in "$WORK_DIR/raw") TEST_SET="newstest2014 full (sacrebleu wmt14/full, en-de, 3003 sentences)" ;;
    *) TEST_SET="$REF" ;; esac
fi
remove_bpe=$([ "$TOKENIZER" = spm ] && echo sentencepiece || echo "@@ ")
NGPU=$(detect_gpus)
if [ "$PRECISION" = auto ]; then PRECISION=$([ "$NGPU" -gt 0 ] && echo fp16 || echo fp32); fi
device_args=()
case $PRECISION in fp16) device_args+=(--fp16) ;; bf16) device_args+=(--bf16) ;; esac
[ "$NGPU" -gt 0 ] || device_args+=(--cpu)

mkdir -p "$EVAL_DIR"
GEN=$EVAL_DIR/generate.out
if [ -f "$GEN" ] && [ "$GEN" -nt "$CHECKPOINT" ]; then
  log "translations up to date: $GEN"
else
  log "translating $GEN_SUBSET with $CHECKPOINT (beam $BEAM, lenpen $LENPEN) -> $GEN"
  run_to "$GEN" fairseq-generate "$DATA_BIN" --user-dir "$USER_DIR" --path "$CHECKPOINT" \
    --gen-subset "$GEN_SUBSET" --beam "$BEAM" --lenpen "$LENPEN" --remove-bpe "$remove_bpe" \
    --required-batch-size-multiple 1 --max-tokens "$GEN_MAX_TOKENS" "${device_args[@]}"
  tail -n 1 "$GEN" | sed "s/^/[$STEP] /" >&2
fi
fairseq-rope-score --generate-output "$GEN" --ref "$REF" --lang "$TGT" \
  --out-dir "$EVAL_DIR" --arch "$ARCH" --run-name "$RUN_NAME" --checkpoint "$CHECKPOINT" --test-set "$TEST_SET" \
  --extra "{\"beam\": $BEAM, \"lenpen\": $LENPEN, \"tokenizer\": \"$TOKENIZER\"}"
