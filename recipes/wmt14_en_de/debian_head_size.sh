#!/usr/bin/env bash
# The head-size question on real text: debian_comparison.sh's two studies at dimension 128, 2 heads of 64
# channels (HEADS=2, the paper's head size) and 4 heads of 32 (HEADS=4), compared from their records.
# Each system of each head size is one system over its seeds (fairseq-rope-compare); the table tests every
# one against the transformer at 2 heads, and the interaction (RoPE at 4 heads - transformer at 4 heads)
# - (RoPE at 2 heads - transformer at 2 heads) says whether RoPE's lead over the transformer depends on the
# head size (Welch's t on the contrast of the per-seed scores). For the whole test set and for each of its
# parts (prose, help), and with each system's 2-head runs as the baseline for its own head-size effect.
# Trains nothing: run the two studies first (their records are in $RECORDS_2 and $RECORDS_4).
#   RECORDS_2  docs/records/debian; RECORDS_4 docs/records/debian_heads4
#   SYSTEMS    "transformer rope_transformer" (the first is the baseline; each needs records at both sizes)
#   OUT_DIR    work/debian_head_size; OUT_DIR=docs regenerates docs/debian_head_size.md
#   RAW_DIR    the corpus (test.{en,de}, report.json); default: debian_corpus.sh's, built if it is not
#   BOOTSTRAP_SAMPLES 1000
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

RECORDS_2=${RECORDS_2:-$REPO_ROOT/docs/records/debian}
RECORDS_4=${RECORDS_4:-$REPO_ROOT/docs/records/debian_heads4}
SYSTEMS=${SYSTEMS:-transformer rope_transformer}
OUT_DIR=${OUT_DIR:-$REPO_ROOT/work/debian_head_size}
BOOTSTRAP_SAMPLES=${BOOTSTRAP_SAMPLES:-1000}
need_int BOOTSTRAP_SAMPLES "$BOOTSTRAP_SAMPLES" 1
need_cmd fairseq-rope-compare "$ROPE_HINT"
# the corpus (its test set's source and reference, and the parts) is built once, in work/debian; RAW_DIR
# given: that corpus, as it is
if [ -n "${RAW_DIR:-}" ]; then
  raw=$RAW_DIR
else
  export RAW_OUT=${RAW_OUT:-$REPO_ROOT/work/debian/raw}
  WORK_DIR=${CORPUS_WORK_DIR:-$REPO_ROOT/work/debian} bash "$RECIPE_DIR/debian_corpus.sh"
  raw=$RAW_OUT
fi
for f in "test.$SRC" "test.$TGT" report.json; do need_file "$raw/$f" "the corpus's $f (RAW_DIR; debian_corpus.sh writes it)"; done
read -r -a systems <<< "$SYSTEMS"
[ ${#systems[@]} -ge 2 ] || die "SYSTEMS must name two or more systems, the first the baseline (got '$SYSTEMS')"

# every seed of every system at both sizes, as NAME_<heads>heads=result.json
runs=()
for system in "${systems[@]}"; do
  for heads in 2 4; do
    records=RECORDS_$heads
    found=("${!records}/${system}"_seed*/result.json)
    [ -f "${found[0]}" ] || die "no records of $system at $heads heads in ${!records} (${system}_seed*/result.json); run debian_comparison.sh with HEADS=$heads and OUT_DIR=docs first"
    [ ${#found[@]} -ge 2 ] || die "$system at $heads heads has one seed in ${!records}: the tests over seeds need two or more"
    for result in "${found[@]}"; do runs+=(--result "${system}_${heads}heads=$result"); done
  done
done
first=${systems[0]}
interactions=()
for system in "${systems[@]:1}"; do
  interactions+=(--interaction "${system}_4heads,${first}_4heads,${system}_2heads,${first}_2heads")
done
mkdir -p "$OUT_DIR"
out=$OUT_DIR/debian_head_size.md
: > "$out.tmp"
compare() {  # compare TITLE [fairseq-rope-compare's options]: one table, appended to the page
  local title=$1
  shift
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} fairseq-rope-compare --src "$raw/test.$SRC" --ref "$raw/test.$TGT" \
    --bootstrap-samples "$BOOTSTRAP_SAMPLES" --title "$title" "$@" > "$out.part"
  { cat "$out.part"; echo; } >> "$out.tmp"
  log "compared: $title"
}
compare "Debian manuals, 2 against 4 heads at dimension 128: both test sets" "${runs[@]}" "${interactions[@]}"
parts=$(debian_test_parts "$raw") || die "$raw/report.json: no test_lines, where each part of the test set starts (debian_corpus.sh writes them)"
for part in $parts; do
  compare "Debian manuals, 2 against 4 heads at dimension 128: the ${part%%=*} test set (lines ${part#*=})" \
    "${runs[@]}" "${interactions[@]}" --lines "${part#*=}"
done
for system in "${systems[@]:1}"; do  # each system's own head-size effect: its 2-head runs first
  own=()
  for ((i = 0; i < ${#runs[@]}; i += 2)); do
    [[ "${runs[i + 1]}" != "${system}"_[24]heads=* ]] || own+=("${runs[i]}" "${runs[i + 1]}")
  done
  compare "Debian manuals, $system at 4 heads against 2 heads: both test sets" "${own[@]}"
done
rm -f "$out.part"
mv -f "$out.tmp" "$out"
log "wrote $out (records: $RECORDS_2, $RECORDS_4; systems: $SYSTEMS)"
