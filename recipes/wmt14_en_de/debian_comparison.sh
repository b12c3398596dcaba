#!/usr/bin/env bash
# RoPE against fairseq's transformer and Shaw's relative positions on real text: the Debian documentation
# corpus (debian_corpus.sh, built first), each system trained with three seeds at a size that trains on
# 2 CPU cores, averaged, translated with beam 4 and scored; then the table (mean ± sd over seeds, paired
# tests), quality by source length and the training curves (sample_figures.sh). Steps already done in
# WORK_DIR are skipped.
#   WORK_DIR   work/debian
#   ARCHS      "transformer rpe_transformer rope_transformer" (the first is the baseline)
#   SEEDS      "1 2 3"
#   MAX_UPDATE 1000 updates of ~2,000 target tokens (1.25 epochs of the corpus), BPE_MERGES 4000
#   OUT_DIR    $WORK_DIR; OUT_DIR=docs regenerates the committed figures
# and every knob of sample.sh (model size: MODEL_ARGS, 2+2 layers of dimension 128) and debian_corpus.sh.
set -euo pipefail
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/debian}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bash "$RECIPE_DIR/debian_corpus.sh"
export RAW_DIR=${RAW_DIR:-${RAW_OUT:-$WORK_DIR/raw}}
export ARCHS=${ARCHS:-transformer rpe_transformer rope_transformer}
export SEEDS=${SEEDS:-1 2 3}
export BPE_MERGES=${BPE_MERGES:-4000}
export MAX_UPDATE=${MAX_UPDATE:-1000}
export NAME=${NAME:-debian}
export TITLE=${TITLE:-Debian manuals (real text)}
export TEST_SET=${TEST_SET:-"Debian documentation test pages (${RAW_DIR#"$REPO_ROOT"/}/test.{en,de}, $(line_count "$RAW_DIR/test.$SRC") sentences)"}
log "real text: corpus $RAW_DIR, work dir $WORK_DIR, runs: $ARCHS, seeds $SEEDS"
bash "$RECIPE_DIR/sample_figures.sh"
