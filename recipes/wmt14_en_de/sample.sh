#!/usr/bin/env bash
# The offline sample run: the whole recipe (run.sh) on the bundled English-German sample
# corpus (sample/, written by make_sample_corpus.py beside it), with a tiny RoPE Transformer and
# a tiny baseline Transformer trained with identical settings on CPU. No network needed;
# about 4-5 minutes on 2 CPU cores. Prints the comparison table at the end.
#
# Every knob of run.sh applies; these defaults differ from the WMT14 ones because the sample
# is small and the budget is minutes:
#   WORK_DIR          <repo>/work/sample
#   RAW_DIR           recipes/wmt14_en_de/sample
#   ARCHS             "rope_transformer transformer" (fairseq's base archs, shrunk by MODEL_ARGS)
#   MODEL_ARGS        2+2 layers, dimension 128, FFN 512, 4 heads (given to both archs via EXTRA_TRAIN_ARGS)
#   PARALLEL_RUNS     2: both models train at the same time, THREADS_PER_RUN=1 thread each
#   BPE_MERGES        1000 (the sample has ~1.1k English and ~1.9k German word types)
#   MAX_UPDATE 800 updates of TOKENS_PER_UPDATE 2000 target tokens (~4 epochs), LR 2e-3,
#   WARMUP_UPDATES 200, SAVE_INTERVAL_UPDATES 50 (so the 5 averaged checkpoints are the last 250
#   updates), LOG_INTERVAL 50. Small batches and many updates learn far more per CPU-second here
#   than the paper's 25k-token batches.
set -euo pipefail
# before common.sh, which would default WORK_DIR to work/wmt14_en_de
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/sample}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

export RAW_DIR=${RAW_DIR:-$RECIPE_DIR/sample}
export ARCHS=${ARCHS:-rope_transformer transformer}
# both models at once, one CPU thread each: on 2 cores this beats two threads per model
export PARALLEL_RUNS=${PARALLEL_RUNS:-2}
export THREADS_PER_RUN=${THREADS_PER_RUN:-1}
MODEL_ARGS=${MODEL_ARGS:-$(small_model 4)}
export EXTRA_TRAIN_ARGS="$MODEL_ARGS${EXTRA_TRAIN_ARGS:+ $EXTRA_TRAIN_ARGS}"
export BPE_MERGES=${BPE_MERGES:-1000}
export MAX_UPDATE=${MAX_UPDATE:-800}
export LR=${LR:-2e-3}
export WARMUP_UPDATES=${WARMUP_UPDATES:-200}
export TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-2000}
export MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-2000}
export SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-50}
export KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-5}
export LOG_INTERVAL=${LOG_INTERVAL:-50}
export TEST_SET=${TEST_SET:-"bundled sample test set (${RAW_DIR#"$REPO_ROOT"/}/test.{en,de}, $(line_count "$RAW_DIR/test.$SRC") sentences)"}

log "offline sample: corpus $RAW_DIR, work dir $WORK_DIR, archs: $ARCHS"
own=$(env | grep -o '^\(LR\|WARMUP_UPDATES\)_[A-Za-z0-9_]*=[^ ]*' | sort | tr '\n' ' ' || true)
log "model: $MODEL_ARGS; $MAX_UPDATE updates of ~$TOKENS_PER_UPDATE tokens, lr $LR, warmup $WARMUP_UPDATES${own:+ (per system where set: ${own% })}"
bash "$RECIPE_DIR/run.sh"
