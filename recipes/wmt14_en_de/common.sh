# Shared helpers of the WMT14 En-De recipe; sourced by every step, never run directly.
# shellcheck shell=bash

RECIPE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$RECIPE_DIR/../.." && pwd)
# --user-dir for every fairseq command, the baseline included: importing the plugin also
# allowlists what fairseq checkpoints pickle, without which torch>=2.6 cannot load them.
USER_DIR=${USER_DIR:-$REPO_ROOT/fairseq_rope}
WORK_DIR=${WORK_DIR:-$REPO_ROOT/work/wmt14_en_de}
SRC=${SRC:-en}
TGT=${TGT:-de}
# The interpreter: the active virtual environment's, else the repository's .venv, else python3.
if [ -z "${PYTHON:-}" ]; then
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then PYTHON=$VIRTUAL_ENV/bin/python
  elif [ -x "$REPO_ROOT/.venv/bin/python" ]; then PYTHON=$REPO_ROOT/.venv/bin/python
  else PYTHON=python3; fi
fi
# fairseq-* and subword-nmt live next to that interpreter
PYTHON_BIN=$(dirname "$(command -v "$PYTHON" || echo "$PYTHON")")
case ":$PATH:" in *":$PYTHON_BIN:"*) ;; *) PATH=$PYTHON_BIN:$PATH ;; esac
export PATH PYTHONUNBUFFERED=1

STEP=$(basename "$0" .sh)
log() { echo "[$STEP] $*" >&2; }
die() { echo "[$STEP] ERROR: $*" >&2; exit 1; }

# need_cmd NAME [hint]: fails naming the missing program
need_cmd() {
  command -v "$1" >/dev/null 2>&1 || die "required program '$1' not found in PATH${2:+ ($2)}"
}
# need_file PATH [what]: fails naming the missing file
need_file() {
  [ -f "$1" ] || die "${2:-required file} not found: $1"
}
# need_int NAME VALUE [min]: an environment knob must be an integer >= min
need_int() {
  [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "${3:-0}" ] \
    || die "$1 must be an integer >= ${3:-0}, got '$2'"
}
# need_num NAME VALUE: a positive number such as 5e-4
need_num() {
  [[ "$2" =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] || die "$1 must be a number, got '$2'"
}
# need_heads VALUE: HEADS, the attention heads of small_model, must divide its dimension 128
need_heads() {
  [[ "$1" =~ ^[1-9][0-9]*$ ]] && [ $((128 % $1)) -eq 0 ] \
    || die "HEADS must be a whole number that divides the model dimension 128 (1, 2, 4, ..., 128), got '$1'"
}
# need_run_name ENTRY: an ARCHS entry (NAME or NAME=ARCH) whose NAME can end a variable's name (LR_NAME, ...)
need_run_name() {
  [[ "${1%%=*}" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "ARCHS: run name '${1%%=*}' (in '$1') must be letters, digits and _"
}
# one_of NAME VALUE CHOICE...
one_of() {
  local name=$1 value=$2; shift 2
  local c; for c in "$@"; do [ "$value" = "$c" ] && return 0; done
  die "$name must be one of: $*; got '$value'"
}

line_count() { wc -l < "$1" | tr -d ' '; }
# runs_of NAME: the run directories of system NAME, as run.sh names them: NAME_seedS for each seed of
# SEEDS_<name> (its own seeds) or else SEEDS, and NAME alone when there are no seeds
runs_of() {
  local own="SEEDS_$1" seed
  local list=${!own:-${SEEDS:-}}
  if [ -z "${list// /}" ]; then echo "$1"; return; fi
  for seed in $list; do echo "$1_seed$seed"; done
}

# small_model HEADS: the model of the sample and of the real-text study (2+2 layers, dimension 128, FFN 512),
# with HEADS attention heads, as fairseq-train flags
small_model() {
  echo "--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 128 --decoder-embed-dim 128 \
--encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 --encoder-attention-heads $1 --decoder-attention-heads $1"
}

# debian_test_parts RAW_DIR: the test set's parts, from debian_corpus.sh's report: "prose=1-1200 help=1201-2400"
debian_test_parts() {
  "$PYTHON" - "$1/report.json" "$(line_count "$1/test.$SRC")" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
if not report.get("test_lines"):
    sys.exit(1)  # (the caller names the file)
starts = sorted((first, name) for name, first in report["test_lines"].items())
ends = [first for first, _ in starts[1:]] + [int(sys.argv[2])]
print(" ".join(f"{name.removeprefix('test_')}={first + 1}-{end}" for (first, name), end in zip(starts, ends)))
EOF
}

# shell_quote ARG...: the arguments as one line that a shell reads back as the same words
# (single quotes around any word with characters other than letters, digits and _./:=,+@%-)
shell_quote() {
  local word out=()
  for word in "$@"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+=("$word")
    else out+=("'${word//\'/\'\\\'\'}'"); fi
  done
  echo "${out[*]}"
}

# check_parallel PREFIX: PREFIX.$SRC and PREFIX.$TGT exist and have equal line counts
check_parallel() {
  local a=$1.$SRC b=$1.$TGT
  need_file "$a" "parallel file"
  need_file "$b" "parallel file"
  local na nb
  na=$(line_count "$a"); nb=$(line_count "$b")
  [ "$na" = "$nb" ] || die "parallel files differ in length: $a has $na lines, $b has $nb lines"
  [ "$na" -gt 0 ] || die "parallel files are empty: $a, $b"
}

# Step markers. A step's outputs are complete when DIR/.done exists; it is written last and
# holds the settings the outputs were made with.
# done_ok DIR SETTINGS: 0 if DIR/.done holds exactly SETTINGS; 1 if absent; dies if different
done_ok() {
  local dir=$1 settings=$2
  [ -f "$dir/.done" ] || return 1
  if [ "$(cat "$dir/.done")" != "$settings" ]; then
    die "$dir was made with other settings:
$(diff <(cat "$dir/.done") <(echo "$settings") | sed 's/^/    /')
  (< made with, > requested). Remove $dir or set another WORK_DIR."
  fi
  return 0
}
mark_done() { printf '%s\n' "$2" > "$1/.done.tmp" && mv -f "$1/.done.tmp" "$1/.done"; }

# settings_changes FILE SETTINGS: for settings written one NAME=value per line, each NAME whose
# value differs between FILE (recorded) and SETTINGS (now), as "  NAME: recorded -> now"
settings_changes() {
  awk 'NR == FNR { i = index($0, "="); old[substr($0, 1, i - 1)] = substr($0, i + 1); next }
       { i = index($0, "="); k = substr($0, 1, i - 1); v = substr($0, i + 1); seen[k] = 1
         if (!(k in old)) printf "  %s: (not recorded) -> %s\n", k, v
         else if (old[k] != v) printf "  %s: %s -> %s\n", k, old[k], v }
       END { for (k in old) if (!(k in seen)) printf "  %s: %s -> (not set)\n", k, old[k] }' "$1" <(printf '%s\n' "$2")
}

# json_field KEY: the value of KEY in the JSON object on stdin (a tool's result), "" for null
json_field() {
  "$PYTHON" -c 'import json, sys; v = json.load(sys.stdin)[sys.argv[1]]; print("" if v is None else v)' "$1"
}

# in_parallel N FUNCTION LOGS NAME...: FUNCTION NAME for every NAME, at most N at once (each in a subshell,
# its lines prefixed by {NAME}); when any fails, stops the recipe naming them and LOGS (where their logs are).
# A command of its own, never under || or if: there bash ignores set -e inside FUNCTION too, and a failed
# step (a training) would not stop its run (the next steps would work on what an earlier run left).
in_parallel() {
  local limit=$1 function=$2 logs=$3 name i
  shift 3
  local pids=() names=() failed=()
  for name in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$limit" ]; do sleep 1; done
    ( "$function" "$name" 2>&1 | sed -u "s/^/{$name} /" ) &
    pids+=($!) names+=("$name")
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done
  [ ${#failed[@]} -eq 0 ] || die "failed: ${failed[*]} (see the lines prefixed by their names above${logs:+, and $logs})"
}

# chosen_lenpen RUN: the length penalty run.sh chose on valid BLEU for RUN ($WORK_DIR/eval/RUN/lenpen.env,
# written by fairseq-rope-tune lenpen); nothing when RUN has none
chosen_lenpen() {
  sed -n 's/^LENPEN_[A-Za-z0-9_]*=//p' "$WORK_DIR/eval/$1/lenpen.env" 2>/dev/null || true
}

# auto_run SYSTEM RUN: the run under which RUN (of SYSTEM: SYSTEM or SYSTEM_seedS) is translated again with
# --rope-scaling auto (run.sh's ROPE_AUTO): SYSTEM_auto, SYSTEM_auto_seedS
auto_run() {
  echo "${1}_auto${2#"$1"}"
}

# run_to OUT CMD...: runs CMD with stdout to OUT.tmp, renamed to OUT only on success
run_to() {
  local out=$1; shift
  "$@" > "$out.tmp" || { local rc=$?; rm -f "$out.tmp"; return $rc; }
  mv -f "$out.tmp" "$out"
}

# visible_gpus: the GPUs this process can see: CUDA_VISIBLE_DEVICES if set, else nvidia-smi -L (0: none)
visible_gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    if [ -z "$CUDA_VISIBLE_DEVICES" ] || [ "$CUDA_VISIBLE_DEVICES" = "-1" ]; then echo 0
    else echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .; fi
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}

# detect_gpus: the GPUs to use on this node: NGPU if set (at most the visible ones), else every visible one
detect_gpus() {
  local visible
  visible=$(visible_gpus)
  if [ -z "${NGPU:-}" ]; then echo "$visible"; return; fi
  need_int NGPU "$NGPU"
  [ "$NGPU" -le "$visible" ] || die "NGPU=$NGPU, but this node shows $visible GPU(s) \
($( [ -n "${CUDA_VISIBLE_DEVICES+x}" ] && echo "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES'" || echo "nvidia-smi -L")): \
lower NGPU, or make more GPUs visible"
  echo "$NGPU"
}

# logged LOG [fairseq-rope-progress options] -- CMD...: runs CMD with its whole output appended to LOG
# and, on the terminal, a progress line at most every PROGRESS_INTERVAL seconds (30); VERBOSE=1 also
# streams everything. A failure shows the end of LOG and its path; the status is CMD's.
VERBOSE=${VERBOSE:-0}
PROGRESS_INTERVAL=${PROGRESS_INTERVAL:-30}
logged() {
  progress_options "$1"; shift
  fairseq-rope-progress "${PROGRESS_OPTIONS[@]}" "$@"
}
# quietly LOG CMD...: runs CMD with its output appended to LOG instead of the terminal (VERBOSE=1: both);
# a failure shows the end of LOG and its path; the status is CMD's
quietly() {
  local log=$1 rc=0; shift
  if [ "$VERBOSE" = 1 ]; then "$@" 2>&1 | tee -a "$log" >&2 || rc=$?
  else "$@" >> "$log" 2>&1 || rc=$?; fi
  if [ "$rc" -ne 0 ]; then
    tail -n 5 "$log" | sed "s/^/[$STEP]   /" >&2
    echo "[$STEP] ERROR: $1 failed (status $rc); its output: $log" >&2
  fi
  return "$rc"
}
# progress_options LOG: fairseq-rope-progress's options for LOG, in the array PROGRESS_OPTIONS (for a
# fairseq-rope-progress started in the background itself, so that its pid is $!)
progress_options() {
  PROGRESS_OPTIONS=(--log "$1" --label "[$STEP]" --interval "$PROGRESS_INTERVAL")
  if [ "$VERBOSE" = 1 ]; then PROGRESS_OPTIONS+=(--verbose); fi
}

# registered_encodings: the models of the position encodings the plugin registers (rope_transformer,
# rpe_transformer, ...), one per line, sorted: the runs of the comparisons that cover every encoding
registered_encodings() {
  (cd "$(dirname "$USER_DIR")" && "$PYTHON" -c 'import importlib, sys; importlib.import_module(sys.argv[1])
print("\n".join(sorted(importlib.import_module(sys.argv[1] + ".encodings").ENCODINGS)))' "$(basename "$USER_DIR")")
}

# The fairseq-rope-* commands come with the package (pip install -e REPO or scripts/setup_env.sh).
ROPE_HINT="install fairseq-rope into this environment: pip install -e $REPO_ROOT"

# The plugin, and fairseq for it, must be there before anything runs with --user-dir. They are looked up,
# not imported (importing fairseq takes seconds, for every step): a plugin or a fairseq that fails to import
# stops fairseq-train or fairseq-generate at once, and the step prints the end of its log with the error.
check_plugin() {
  [ -f "$USER_DIR/__init__.py" ] || die "USER_DIR=$USER_DIR is not the fairseq_rope plugin (no __init__.py)"
  "$PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("fairseq") is None)' \
    || die "$PYTHON has no fairseq: pip install fairseq-fixed==0.12.3.1 (see docs/installation.md)"
}
