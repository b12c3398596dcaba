#!/usr/bin/env bash
# RoPE against fairseq's transformer and Shaw's relative positions on real text, the Debian documentation
# corpus (debian_corpus.sh, built first), each system tuned on its own and trained until it stops
# improving, then several seeds:
#   1. tune.sh       learning rate x warm-up on valid loss, per system, one seed ($WORK_DIR/tune/chosen.env);
#                    CHOSEN=FILE: the settings a grid chose before (e.g. docs/debian_tuning.env), not tuned again
#   2. converge.sh   the budget at which every system's valid loss is flat ($WORK_DIR/tune/budget.env,
#                    published as $OUT_DIR/${NAME}_budget.env)
#   3. every seed trained to that budget, the last 5 checkpoints averaged, the length penalty chosen on
#      valid BLEU per run (LENPENS), the test set translated with beam 4 and scored, then the tables
#      (mean ± sd over seeds, two-sided tests over seeds, intervals), for the whole test set and for
#      its prose and help parts (report.json's test_lines), quality by length and the curves
#      (sample_figures.sh).
# Every step skips what is done and resumes what is not (each run from its last checkpoint).
#   WORK_DIR   work/debian
#   ARCHS      "transformer rpe_transformer rope_transformer" (the first is the baseline)
#   AGAINST    rpe_transformer: the tables again with Shaw's RPE as the one tested against (RoFormer's Table 1
#              sets RoPE beside it), ${NAME}_against_rpe_transformer.md and per part; "" for none
#   SEEDS      "1 2 3 4 5"; SEEDS_rpe_transformer "1 2 3"
#   HEADS      2 attention heads of 64 channels at dimension 128 (the paper's head size); 4: 32 a head.
#              WORK_DIR defaults to work/debian_heads4 for HEADS=4, so the two studies sit side by side
#   LENPENS    "0.2 0.6 1.0 1.4"
#   BPE_MERGES 4000; TOKENS_PER_UPDATE 2000; SAVE_INTERVAL_UPDATES 200 (5 averaged: the last 1000 updates)
#   OUT_DIR    $WORK_DIR; OUT_DIR=docs regenerates the committed tables and figures
#   RECORDS    $OUT_DIR/records/$NAME: every finished run kept as a record there (run.sh's RECORDS: no
#              checkpoints), and restored from it, not trained again, where its settings are equal
# and the knobs of tune.sh (TUNE_*), converge.sh (CONVERGE_*, FLAT_*), sample_figures.sh, sample.sh and
# debian_corpus.sh. MAX_UPDATE given: that budget, and converge.sh is not run. A study can so go on on
# another machine from its published steps: CHOSEN=docs/debian_tuning.env MAX_UPDATE=<debian_budget.env's>
# OUT_DIR=docs trains only the runs that docs/records/debian does not hold.
set -euo pipefail
HEADS=${HEADS:-2}
default_work=work/debian$([ "$HEADS" = 2 ] || echo "_heads$HEADS")
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/$default_work}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
need_heads "$HEADS"

# the corpus is built once, in work/debian, whatever the study's WORK_DIR
export RAW_OUT=${RAW_OUT:-$REPO_ROOT/work/debian/raw}
WORK_DIR=${CORPUS_WORK_DIR:-$REPO_ROOT/work/debian} bash "$RECIPE_DIR/debian_corpus.sh"
export RAW_DIR=${RAW_DIR:-$RAW_OUT}
export ARCHS=${ARCHS:-transformer rpe_transformer rope_transformer}
export SEEDS=${SEEDS:-1 2 3 4 5}
export SEEDS_rpe_transformer=${SEEDS_rpe_transformer-1 2 3}
[ -n "$SEEDS_rpe_transformer" ] || unset SEEDS_rpe_transformer
[[ " $ARCHS " == *" rpe_transformer "* ]] || unset SEEDS_rpe_transformer
export AGAINST=${AGAINST-$([[ " ${ARCHS#* } " == *" rpe_transformer "* ]] && echo rpe_transformer)}
export BPE_MERGES=${BPE_MERGES:-4000}
export LENPENS=${LENPENS-0.2 0.6 1.0 1.4}
export TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-2000} MAX_TOKENS_PER_GPU=${MAX_TOKENS_PER_GPU:-2000}
export SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-200} KEEP_INTERVAL_UPDATES=${KEEP_INTERVAL_UPDATES:-5}
export LOG_INTERVAL=${LOG_INTERVAL:-100}
if [ -z "${MODEL_ARGS:-}" ]; then model="$HEADS heads"
elif [ -z "${MODEL_ARGS// /}" ]; then model="each arch's own size (MODEL_ARGS blank)"
else model="MODEL_ARGS $MODEL_ARGS"; fi
export MODEL_ARGS=${MODEL_ARGS:-$(small_model $HEADS)}
export NAME=${NAME:-debian$([ "$HEADS" -eq 2 ] || echo "_heads$HEADS")}
export RECORDS=${RECORDS-${OUT_DIR:-$WORK_DIR}/records/$NAME}
export TITLE=${TITLE:-Debian manuals (real text), $HEADS heads of $((128 / HEADS)) channels}
export TEST_SET=${TEST_SET:-"Debian documentation test pages (${RAW_DIR#"$REPO_ROOT"/}/test.{en,de}, $(line_count "$RAW_DIR/test.$SRC") sentences)"}
need_file "$RAW_DIR/report.json" "the corpus report (debian_corpus.sh writes it)"
TEST_PARTS=${TEST_PARTS:-$(debian_test_parts "$RAW_DIR")}
export TEST_PARTS
log "real text: corpus $RAW_DIR, work dir $WORK_DIR, runs: $ARCHS, seeds $SEEDS${SEEDS_rpe_transformer:+ (rpe_transformer: $SEEDS_rpe_transformer)}, $model; test parts: $TEST_PARTS"

# the data once (tune.sh trains on it before sample.sh's run.sh would see it); tune.sh, converge.sh and
# sample.sh each add MODEL_ARGS to EXTRA_TRAIN_ARGS, in the same way, so a run has one record everywhere
bash "$RECIPE_DIR/prepare.sh"
if [ -n "${CHOSEN:-}" ]; then
  need_file "$CHOSEN" "the tuned settings (CHOSEN; tune.sh writes them as \$OUT_DIR/\${NAME}_tuning.env)"
  log "tuned settings from $CHOSEN: tune.sh not run"
else
  bash "$RECIPE_DIR/tune.sh"
  CHOSEN=$WORK_DIR/tune/chosen.env
fi
export CHOSEN  # (converge.sh reads it)
set -a
# shellcheck disable=SC1090
. "$CHOSEN"
set +a
if [ -z "${MAX_UPDATE:-}" ]; then
  bash "$RECIPE_DIR/converge.sh"
  # shellcheck disable=SC1091
  . "$WORK_DIR/tune/budget.env"
fi
export MAX_UPDATE
log "tuned settings: $(grep -o '^[A-Z_a-z]*=[^ ]*' "$CHOSEN" | tr '\n' ' '); budget $MAX_UPDATE updates"
bash "$RECIPE_DIR/sample_figures.sh"
