#!/usr/bin/env bash
# Where relative positions should help, on real text: the comparison of debian_comparison.sh (each system
# tuned, trained until flat, several seeds) trained only on the corpus's pairs of at most TRAIN_MAX_WORDS
# English words (training and valid), and tested on the whole test sets, by source length up to three times
# that and beyond: 1-N (seen lengths), N+1-2N, 2N+1-3N, longer. RoPE is also translated with
# --rope-scaling auto (system rope_transformer_auto). With N = 12 the prose test set has 204 sentences of
# 25-36 words and 71 longer (the Handbook's and the Reference's long sentences); 20,139 of the 44,359
# training pairs are kept.
#   TRAIN_MAX_WORDS  12; WORK_DIR work/debian_len$TRAIN_MAX_WORDS; BUCKETS N,2N,3N
# and every knob of debian_comparison.sh (ARCHS, SEEDS, HEADS, TUNE_*, CONVERGE_*, ...).
set -euo pipefail
TRAIN_MAX_WORDS=${TRAIN_MAX_WORDS:-12}
[[ "$TRAIN_MAX_WORDS" =~ ^[1-9][0-9]*$ ]] || { echo "TRAIN_MAX_WORDS must be a positive number of words, got '$TRAIN_MAX_WORDS'" >&2; exit 1; }
export WORK_DIR=${WORK_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/work/debian_len$TRAIN_MAX_WORDS}
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CORPUS=${RAW_OUT:-$REPO_ROOT/work/debian/raw}
WORK_DIR=${CORPUS_WORK_DIR:-$REPO_ROOT/work/debian} RAW_OUT=$CORPUS bash "$RECIPE_DIR/debian_corpus.sh"
RAW=$WORK_DIR/raw
if done_ok "$RAW" "TRAIN_MAX_WORDS=$TRAIN_MAX_WORDS CORPUS=$(cat "$CORPUS/.done" | sha256sum | cut -c1-16)"; then
  log "length split already written: $RAW"
else
  mkdir -p "$RAW"
  "$PYTHON" - "$CORPUS" "$RAW" "$TRAIN_MAX_WORDS" <<'EOF'
import os, shutil, sys
corpus, out, most = sys.argv[1], sys.argv[2], int(sys.argv[3])
for split in ("train", "valid"):
    files = [f"{split}.en", f"{split}.de", f"{split}.docids"]
    columns = [open(os.path.join(corpus, f), encoding="utf-8").read().splitlines() for f in files]
    keep = [row for row in zip(*columns) if len(row[0].split()) <= most]
    for k, name in enumerate(files):
        with open(os.path.join(out, name + ".tmp"), "w", encoding="utf-8") as f:
            f.writelines(row[k] + "\n" for row in keep)
        os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
    print(f"[debian_length_split] {split}: {len(keep)} of {len(columns[0])} pairs of at most {most} English words", file=sys.stderr)
for name in sorted(os.listdir(corpus)):
    if name.startswith("test") or name == "report.json":
        shutil.copyfile(os.path.join(corpus, name), os.path.join(out, name))
EOF
  mark_done "$RAW" "TRAIN_MAX_WORDS=$TRAIN_MAX_WORDS CORPUS=$(cat "$CORPUS/.done" | sha256sum | cut -c1-16)"
fi
export RAW_DIR=$RAW TRAIN_MAX_WORDS
export BUCKETS=${BUCKETS:-$TRAIN_MAX_WORDS,$((2 * TRAIN_MAX_WORDS)),$((3 * TRAIN_MAX_WORDS))}
export ROPE_AUTO=${ROPE_AUTO:-1}
export NAME=${NAME:-debian_len$TRAIN_MAX_WORDS}
export TITLE=${TITLE:-Debian manuals, trained on sentences of at most $TRAIN_MAX_WORDS words}
log "length split: training and valid pairs of at most $TRAIN_MAX_WORDS English words ($RAW), buckets $BUCKETS"
bash "$RECIPE_DIR/debian_comparison.sh"
