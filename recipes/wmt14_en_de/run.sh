#!/usr/bin/env bash
# Every stage for every architecture: Table 1 of the RoFormer paper (WMT14 En-De, BLEU).
#   ARCHS          "rope_transformer_wmt_en_de transformer_wmt_en_de" (RoFormer, Transformer-base baseline)
#   PARALLEL_RUNS  1: architectures one after the other (default). N > 1: train/average/evaluate
#                  up to N architectures at once, each with THREADS_PER_RUN CPU threads
#                  (default 1; for CPU runs such as the sample, where one process per core is
#                  faster than two processes fighting over the same cores)
# All knobs of prepare.sh, train.sh, average.sh and evaluate.sh apply, identically to every
# architecture. Outputs: $WORK_DIR/{raw,prep,data-bin,checkpoints/<arch>,eval/<arch>} and the
# table $WORK_DIR/results.md. Re-running skips finished stages and resumes unfinished ones.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCHS=${ARCHS:-rope_transformer_wmt_en_de transformer_wmt_en_de}
PARALLEL_RUNS=${PARALLEL_RUNS:-1}
THREADS_PER_RUN=${THREADS_PER_RUN:-1}
[ -n "${ARCHS// /}" ] || die "ARCHS is empty: name at least one architecture"
need_int PARALLEL_RUNS "$PARALLEL_RUNS" 1
need_cmd fairseq-rope-results "$ROPE_HINT"
need_int THREADS_PER_RUN "$THREADS_PER_RUN" 1
unset RUN_NAME SAVE_DIR EVAL_DIR CHECKPOINT AVG_CHECKPOINT  # set per architecture below
export WORK_DIR

stage() {  # stage NAME SCRIPT [VAR=VALUE...]
  local name=$1 script=$2 start=$SECONDS; shift 2
  log "=== $name ($script) ==="
  env "$@" bash "$RECIPE_DIR/$script"
  log "=== $name: done in $((SECONDS - start)) s ==="
}
model() {  # model ARCH [VAR=VALUE...]: train, average, evaluate one architecture
  local arch=$1; shift
  stage "train $arch" train.sh ARCH="$arch" RUN_NAME="$arch" "$@"
  stage "average $arch" average.sh ARCH="$arch" RUN_NAME="$arch" "$@"
  stage "evaluate $arch" evaluate.sh ARCH="$arch" RUN_NAME="$arch" "$@"
}

stage "prepare data" prepare.sh
results=()
for arch in $ARCHS; do results+=("$WORK_DIR/eval/$arch/result.json"); done
if [ "$PARALLEL_RUNS" -le 1 ]; then
  for arch in $ARCHS; do model "$arch"; done
else
  log "running up to $PARALLEL_RUNS architectures at once, $THREADS_PER_RUN thread(s) each; lines are prefixed by architecture"
  pids=() names=()
  for arch in $ARCHS; do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL_RUNS" ]; do sleep 1; done
    ( model "$arch" OMP_NUM_THREADS="$THREADS_PER_RUN" MKL_NUM_THREADS="$THREADS_PER_RUN" 2>&1 \
        | sed -u "s/^/{$arch} /" ) &
    pids+=($!) names+=("$arch")
  done
  failed=()
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done
  [ ${#failed[@]} -eq 0 ] || die "failed: ${failed[*]} (see the {arch}-prefixed lines above and $WORK_DIR/checkpoints/<arch>/train.log)"
fi
log "=== results ($WORK_DIR/results.md) ==="
fairseq-rope-results "${results[@]}" --output "$WORK_DIR/results.md"
log "all stages done in $SECONDS s"
