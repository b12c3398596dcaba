#!/usr/bin/env bash
# RoPE against fairseq's transformer and Shaw's relative positions on real text, the Debian documentation
# corpus (debian_corpus.sh, built first), each system tuned on its own and trained until it stops
# improving, then several seeds:
#   1. tune.sh       learning rate x warm-up on valid loss, per system, one seed ($WORK_DIR/tune/chosen.env);
#                    CHOSEN=FILE: the settings a grid chose before (e.g. docs/debian_tuning.env), not tuned again;
#                    the lines of the systems in ARCHS are taken from it, the others left
#   2. converge.sh   the budget at which every system's valid loss is flat ($WORK_DIR/tune/budget.env,
#                    published as $OUT_DIR/${NAME}_budget.env)
#   3. every seed trained to that budget, the last 5 checkpoints averaged, the length penalty chosen on
#      valid BLEU per run (LENPENS), the test set translated with beam 4 and scored, then the tables
#      (mean ± sd over seeds, two-sided tests over seeds, intervals), for the whole test set and for
#      its prose and help parts (report.json's test_lines), quality by length and the curves
#      (sample_figures.sh).
# Every step skips what is done and resumes what is not (each run from its last checkpoint).
#   WORK_DIR   work/debian
#   RAW_DIR    unset: debian_corpus.sh builds Debian's corpus in work/debian/raw; a directory: that corpus as
#              it is (train/valid/test.{en,de} and debian_corpus.sh's report.json: the test set's parts)
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

# RAW_DIR unset: Debian's corpus, built once in work/debian whatever the study's WORK_DIR; given: that
# corpus as it is (a split of it, or a corpus of one's own with debian_corpus.sh's report.json)
if [ -z "${RAW_DIR:-}" ]; then
  export RAW_OUT=${RAW_OUT:-$REPO_ROOT/work/debian/raw}
  WORK_DIR=${CORPUS_WORK_DIR:-$REPO_ROOT/work/debian} bash "$RECIPE_DIR/debian_corpus.sh"
  export RAW_DIR=$RAW_OUT
fi
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
need_file "$RAW_DIR/test.$SRC" "the test set's source side"
export TEST_SET=${TEST_SET:-"Debian documentation test pages (${RAW_DIR#"$REPO_ROOT"/}/test.{en,de}, $(line_count "$RAW_DIR/test.$SRC") sentences)"}
if [ -z "${TEST_PARTS:-}" ]; then
  need_file "$RAW_DIR/report.json" "the corpus report (debian_corpus.sh writes it; or give TEST_PARTS)"
  TEST_PARTS=$(debian_test_parts "$RAW_DIR") || die "$RAW_DIR/report.json: no test_lines, where each part of the test set starts (debian_corpus.sh writes them; or give TEST_PARTS)"
fi
export TEST_PARTS
log "real text: corpus $RAW_DIR, work dir $WORK_DIR, runs: $ARCHS, seeds $SEEDS${SEEDS_rpe_transformer:+ (rpe_transformer: $SEEDS_rpe_transformer)}, $model; test parts: $TEST_PARTS"

# take_tuned: the settings of the systems in ARCHS from $CHOSEN, exported for run.sh (and listed in
# $tuned); a CHOSEN of more systems serves a study of fewer (run.sh refuses a system's setting when ARCHS
# has no such system: a typo), a system without its lines is an error
take_tuned() {
  local entry system var
  # shellcheck disable=SC1090
  . "$CHOSEN"
  tuned=()
  for entry in $ARCHS; do
    need_run_name "$entry"
    system=${entry%%=*}
    for var in "LR_$system" "WARMUP_UPDATES_$system"; do
      [ -n "${!var:-}" ] || die "$CHOSEN has no $var for the system $system of ARCHS=\"$ARCHS\" (tune.sh with those ARCHS writes it)"
    done
    for var in "LR_$system" "WARMUP_UPDATES_$system" "ARGS_$system"; do
      [ -z "${!var+set}" ] || { export "${var?}"; tuned+=("$var=${!var}"); }
    done
  done
}
if [ -n "${CHOSEN:-}" ]; then
  need_file "$CHOSEN" "the tuned settings (CHOSEN; tune.sh writes them as \$OUT_DIR/\${NAME}_tuning.env)"
  take_tuned
fi
# the data once (tune.sh trains on it before sample.sh's run.sh would see it); tune.sh, converge.sh and
# sample.sh each add MODEL_ARGS to EXTRA_TRAIN_ARGS, in the same way, so a run has one record everywhere
bash "$RECIPE_DIR/prepare.sh"
if [ -n "${CHOSEN:-}" ]; then
  log "tuned settings from $CHOSEN: tune.sh not run"
else
  bash "$RECIPE_DIR/tune.sh"
  CHOSEN=$WORK_DIR/tune/chosen.env
  take_tuned
fi
export CHOSEN  # (converge.sh reads it)
if [ -z "${MAX_UPDATE:-}" ]; then
  bash "$RECIPE_DIR/converge.sh"
  # shellcheck disable=SC1091
  . "$WORK_DIR/tune/budget.env"
fi
export MAX_UPDATE
log "tuned settings (from $CHOSEN): $(shell_quote "${tuned[@]}"); budget $MAX_UPDATE updates"
bash "$RECIPE_DIR/sample_figures.sh"
