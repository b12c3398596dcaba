#!/usr/bin/env bash
# Every stage for every architecture: Table 1 of the RoFormer paper (WMT14 En-De, BLEU).
#   ARCHS          "rope_transformer_wmt_en_de transformer_wmt_en_de" (RoFormer, Transformer-base baseline):
#                  the runs, space-separated. Each is an architecture (the run is named after it) or
#                  NAME=ARCH, a run named NAME (letters, digits, _) of architecture ARCH. A run's own
#                  fairseq-train flags go in ARGS_<name>, after EXTRA_TRAIN_ARGS, e.g. learned
#                  absolute positions or Shaw's keys-only ablation:
#                    ARCHS="transformer_wmt_en_de learned=transformer_wmt_en_de rpe_keys=rpe_transformer_wmt_en_de"
#                    ARGS_learned="--encoder-learned-pos --decoder-learned-pos" ARGS_rpe_keys="--rpe-keys-only"
#   SEEDS          training seeds, e.g. "1 2 3": every run is trained once per seed, as run NAME_seedS
#                  (checkpoints/NAME_seedS, eval/NAME_seedS, fairseq-train --seed S), and the table gives
#                  each run's mean and standard deviation over its seeds, every seed's figure, and a test
#                  against BASELINE that accounts for seeds and test sentences (docs/evaluation.md).
#                  Default: unset, one run per entry of ARCHS with train.sh's SEED (1), named NAME
#   LR_<name>, WARMUP_UPDATES_<name>  this system's own learning rate and warm-up (tune.sh chooses them)
#   SEEDS_<name>   this system's own seeds, in place of SEEDS (e.g. SEEDS="1 2 3 4 5" SEEDS_rpe_transformer="1 2 3")
#   LENPENS        length penalties to try on the valid set, e.g. "0.6 1.0 1.4" (default: unset, evaluate.sh's
#                  LENPEN): each run translates valid with each (eval/NAME/valid_lenpenX) and the test set
#                  with the one of highest valid BLEU (fairseq-rope-tune lenpen; ties: the nearest to 0.6)
#   BASELINE       the run the others are tested against when there are several seeds (default: the first
#                  run whose architecture starts with "transformer", else the first run)
#   PARALLEL_RUNS  1: architectures one after the other (default). N > 1: train/average/evaluate
#                  up to N architectures at once, each with THREADS_PER_RUN CPU threads
#                  (default 1; for CPU runs such as the sample, where one process per core is
#                  faster than two processes fighting over the same cores)
#   ROPE_AUTO      0; 1: every RoPE run's model also translates the test set with --rope-scaling auto (its own
#                  training length), as the system <name>_auto (eval/<name>_auto_seedS), with the run's length penalty
#   RECORDS        unset; DIR: every finished run is kept as a record DIR/<run> (fairseq-rope-record: its
#                  train.log, test result, hypotheses and reference scores, no checkpoints), and a run whose
#                  record has its settings (train.sh's, the data and the reference by content, the
#                  evaluation's) is restored from it, not trained again: a study goes on after its work
#                  folder is lost, or on another machine
# All knobs of prepare.sh, train.sh, average.sh and evaluate.sh apply, identically to every
# architecture. Outputs: $WORK_DIR/{raw,prep,data-bin,checkpoints/<arch>,eval/<arch>} and the
# table $WORK_DIR/results.md. Re-running skips finished stages and resumes unfinished ones.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ARCHS=${ARCHS:-rope_transformer_wmt_en_de transformer_wmt_en_de}
PARALLEL_RUNS=${PARALLEL_RUNS:-1}
THREADS_PER_RUN=${THREADS_PER_RUN:-1}
[ -n "${ARCHS// /}" ] || die "ARCHS is empty: name at least one architecture"
# the runs: names (outputs checkpoints/<name>, eval/<name>), their architectures and own flags
SEEDS=${SEEDS:-}
seeds=()
for seed in $SEEDS; do
  need_int SEEDS "$seed"
  [[ " ${seeds[*]} " != *" $seed "* ]] || die "SEEDS lists seed $seed twice (SEEDS=\"$SEEDS\")"
  seeds+=("$seed")
done
[ -z "${SEEDS// /}" ] || [ ${#seeds[@]} -gt 0 ] || die "SEEDS is set but lists no seed"
seeds_of() {  # seeds_of NAME: the seeds of system NAME (SEEDS_<name>, else SEEDS), checked
  local own="SEEDS_$1" list=() seed
  [ -n "${!own+x}" ] || { echo "${seeds[*]}"; return; }
  for seed in ${!own}; do
    need_int "$own" "$seed"
    [[ " ${list[*]} " != *" $seed "* ]] || die "$own lists seed $seed twice ($own=\"${!own}\")"
    list+=("$seed")
  done
  [ ${#list[@]} -gt 0 ] || die "$own is set but lists no seed"
  echo "${list[*]}"
}
# the runs: names (outputs checkpoints/<name>, eval/<name>), their architectures, own flags and seeds;
# with SEEDS, run NAME_seedS is seed S of the system NAME
systems=() runs=()
declare -A arch_of=() system_of=() seed_of=() rank_of=()
for entry in $ARCHS; do
  name=${entry%%=*} arch=${entry#*=}
  need_run_name "$entry"
  [[ "$arch" =~ ^[A-Za-z0-9_]+$ ]] || die "ARCHS: '$entry' must be ARCH or NAME=ARCH"
  [[ " ${systems[*]} " != *" $name "* ]] || die "ARCHS: two runs are named '$name'; give one another name (NAME=ARCH)"
  systems+=("$name")
  # shellcheck disable=SC2207
  own_seeds=($(seeds_of "$name"))
  if [ ${#own_seeds[@]} -eq 0 ]; then
    runs+=("$name"); arch_of[$name]=$arch system_of[$name]=$name seed_of[$name]=${SEED:-1} rank_of[$name]=0
  else
    for rank in "${!own_seeds[@]}"; do
      run=${name}_seed${own_seeds[$rank]}
      runs+=("$run"); arch_of[$run]=$arch system_of[$run]=$name seed_of[$run]=${own_seeds[$rank]} rank_of[$run]=$rank
    done
  fi
done
# the runs seed by seed: every system's first seed, then every system's second, ... (a study cut short has
# as many seeds of every system as it could train)
ordered=()
for ((rank = 0; ${#ordered[@]} < ${#runs[@]}; rank++)); do
  for run in "${runs[@]}"; do [ "${rank_of[$run]}" -ne "$rank" ] || ordered+=("$run"); done
done
runs=("${ordered[@]}")
for prefix in ARGS SEEDS LR WARMUP_UPDATES; do  # a system's own setting for a run that does not exist: a typo
  for var in $(compgen -v "${prefix}_" || true); do
    [[ " ${systems[*]} " == *" ${var#"${prefix}_"} "* ]] \
      || die "$var is set, but no run in ARCHS is named '${var#"${prefix}_"}' (ARCHS=\"$ARCHS\")"
  done
done
LENPENS=${LENPENS:-}
for lenpen in $LENPENS; do need_num LENPENS "$lenpen"; done
[ -z "${LENPENS// /}" ] || need_cmd fairseq-rope-tune "$ROPE_HINT"
if [ -z "${BASELINE:-}" ]; then
  BASELINE=${systems[0]}
  for entry in $ARCHS; do
    if [[ "${entry#*=}" == transformer* ]]; then BASELINE=${entry%%=*}; break; fi
  done
fi
[[ " ${systems[*]} " == *" $BASELINE "* ]] || die "BASELINE=$BASELINE is not a run of ARCHS (\"$ARCHS\")"
# run_args NAME: the EXTRA_TRAIN_ARGS of run NAME (the global ones, then ARGS_<name>)
run_args() {
  local own="ARGS_$1"
  echo "${EXTRA_TRAIN_ARGS:-}${!own:+${EXTRA_TRAIN_ARGS:+ }${!own}}"
}
need_int PARALLEL_RUNS "$PARALLEL_RUNS" 1
RECORDS=${RECORDS:-}
ROPE_AUTO=${ROPE_AUTO:-0}
one_of ROPE_AUTO "$ROPE_AUTO" 0 1
[ -z "$RECORDS" ] || need_cmd fairseq-rope-record "$ROPE_HINT"
need_cmd fairseq-rope-results "$ROPE_HINT"
need_int THREADS_PER_RUN "$THREADS_PER_RUN" 1
unset RUN_NAME SAVE_DIR EVAL_DIR CHECKPOINT AVG_CHECKPOINT  # set per architecture below
export WORK_DIR

stage() {  # stage NAME SCRIPT [VAR=VALUE...]: the script says what it starts; its end and time here
  local name=$1 script=$2 start=$SECONDS; shift 2
  env "$@" bash "$RECIPE_DIR/$script"
  log "=== $name: done in $((SECONDS - start)) s ==="
}
model() {  # model NAME [VAR=VALUE...]: train, average, evaluate one run
  local name=$1 arch=${arch_of[$1]} system=${system_of[$1]}; shift
  local run=(ARCH="$arch" RUN_NAME="$name" SYSTEM="$system" SEED="${seed_of[$name]}"
             EXTRA_TRAIN_ARGS="$(run_args "$system")") own_lr="LR_$system" own_warmup="WARMUP_UPDATES_$system"
  [ -z "${!own_lr:-}" ] || run+=(LR="${!own_lr}")
  [ -z "${!own_warmup:-}" ] || run+=(WARMUP_UPDATES="${!own_warmup}")
  local auto=""  # (ROPE_AUTO: the run's second translation, with --rope-scaling auto)
  [ "$ROPE_AUTO" = 0 ] || [[ "$arch" != rope_transformer* ]] || auto=$(auto_run "$system" "$name")
  if [ -n "$RECORDS" ]; then
    local record=("$RECORDS/$name" --checkpoints "$WORK_DIR/checkpoints/$name"
      --eval "$WORK_DIR/eval/$name" --settings "$WORK_DIR/checkpoints/$name.settings" --data-bin "$data_bin"
      --reference "$reference" --set "BEAM=${BEAM:-4}" --set "LENPENS=$LENPENS" --set "LENPEN=${LENPEN:-0.6}"
      --set "AVERAGE_LAST=${AVERAGE_LAST:-5}" --set "REFERENCE_NLL=${REFERENCE_NLL:-1}" --set "TEST_SET=${TEST_SET:-}")
    [ -z "$auto" ] || record+=(--also-eval "$WORK_DIR/eval/$auto" --set "ROPE_AUTO=1")
    mkdir -p "$WORK_DIR/checkpoints"
    env "${run[@]}" "$@" PRINT_SETTINGS=1 bash "$RECIPE_DIR/train.sh" > "$WORK_DIR/checkpoints/$name.settings"
    local status=0
    fairseq-rope-record restore "${record[@]}" || status=$?
    [ "$status" -eq 0 ] && { log "=== $name: restored from its record $RECORDS/$name, not trained again ==="; return 0; }
    [ "$status" -eq 3 ] || die "fairseq-rope-record restore $RECORDS/$name failed (exit status $status)"
  fi
  stage "train $name" train.sh "${run[@]}" "$@"
  stage "average $name" average.sh "${run[@]}" "$@"
  local lenpen=() results=() penalty
  if [ -n "${LENPENS// /}" ]; then
    for penalty in $LENPENS; do
      stage "valid $name, length penalty $penalty" evaluate.sh "${run[@]}" GEN_SUBSET=valid LENPEN="$penalty" REFERENCE_NLL=0 \
        EVAL_DIR="$WORK_DIR/eval/$name/valid_lenpen$penalty" TEST_SET="valid" "$@"
      results+=("$WORK_DIR/eval/$name/valid_lenpen$penalty/result.json")
    done
    fairseq-rope-tune lenpen "${results[@]}" --out-env "$WORK_DIR/eval/$name/lenpen.env"
    lenpen=(LENPEN="$(chosen_lenpen "$name")")
  fi
  stage "evaluate $name" evaluate.sh "${run[@]}" "${lenpen[@]}" "$@"
  [ -z "$auto" ] || stage "evaluate $auto" evaluate.sh "${run[@]}" "${lenpen[@]}" RUN_NAME="$auto" SYSTEM="${system}_auto" \
    EVAL_DIR="$WORK_DIR/eval/$auto" CHECKPOINT="$WORK_DIR/checkpoints/$name/checkpoint_avg_last${AVERAGE_LAST:-5}.pt" \
    MODEL_OVERRIDES="{'rope_scaling': 'auto'}" "$@"
  [ -z "$RECORDS" ] || fairseq-rope-record save "${record[@]}"
}

stage "prepare data" prepare.sh
# (a record's settings name the data and the test set's reference by their contents)
data_bin=${DATA_BIN:-$WORK_DIR/data-bin}
reference=${REF:-$(sed -n 's/^RAW_DIR=//p' "$data_bin/recipe.env")/test.$TGT}
results=()
for name in "${runs[@]}"; do results+=("$WORK_DIR/eval/$name/result.json"); done
if [ "$ROPE_AUTO" = 1 ]; then
  for name in "${runs[@]}"; do
    [[ "${arch_of[$name]}" != rope_transformer* ]] || results+=("$WORK_DIR/eval/$(auto_run "${system_of[$name]}" "$name")/result.json")
  done
fi
if [ "$PARALLEL_RUNS" -le 1 ]; then
  for name in "${runs[@]}"; do model "$name"; done
else
  log "running up to $PARALLEL_RUNS runs at once, $THREADS_PER_RUN thread(s) each; lines are prefixed by run"
  threaded_model() { model "$1" OMP_NUM_THREADS="$THREADS_PER_RUN" MKL_NUM_THREADS="$THREADS_PER_RUN"; }
  in_parallel "$PARALLEL_RUNS" threaded_model "$WORK_DIR/checkpoints/<run>/train.log" "${runs[@]}"
fi
log "=== results ($WORK_DIR/results.md) ==="
fairseq-rope-results "${results[@]}" --baseline "$BASELINE" --output "$WORK_DIR/results.md"
log "all stages done in $SECONDS s"
