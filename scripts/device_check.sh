#!/usr/bin/env bash
# The prepared GPU runs, for a lent machine with PyTorch and Triton but no network (developer tool).
#
#   bash scripts/device_check.sh prepare   # here: the wheels that machine lacks, into .device_wheels/, and the
#                                          # Debian corpus packed as work/debian/raw.tar.gz (where
#                                          # debian_corpus.sh built it); checks that a call's files fit
#   bash scripts/device_check.sh run       # there: install them, tests/test_cuda.py, scripts/gpu_ab.py
#   bash scripts/device_check.sh study     # there: the real-text comparison at the iwslt_de_en size (below)
#
# `run` writes into $OUT (default /tmp/device_out): test_cuda.log, gpu_ab.json (written after every step,
# so a cut run keeps what it measured) and gpu_ab.log. GPU_AB_ARGS adds scripts/gpu_ab.py flags
# (e.g. "--budget-s 200"). About 7 minutes on one H100/H200 with the machine's start.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=.device_wheels
CORPUS=work/debian/raw.tar.gz
PYTHON=${PYTHON:-python3}
# what one call of the device tool may send: the tracked files, the untracked ones git does not ignore and
# the carried paths, 64 MiB in all
SEND_LIMIT=$((64 << 20))

install_here() {  # the wheels, then fairseq-rope itself, into the machine's Python (no network there)
  "$PYTHON" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl
  "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation -e .
}

case "${1:-}" in
  prepare)
    # no torch (the machine has its own) and no dependency resolution (it would fetch torch): the list is
    # fairseq-fixed's, sacrebleu's and fairseq-rope's own requirements, as the CPU venv has them, less
    # what the machine's image holds and is large (lxml, regex, sentencepiece; the device tool's KINDS.md
    # lists the image's packages), so that a call's files stay under SEND_LIMIT
    # antlr4-python3-runtime 4.9.3 has no wheel on PyPI: built here from its pure-Python sdist
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$WHEELS" \
      fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray sacrebleu==2.6.0 portalocker tabulate \
      colorama sacremoses subword-nmt sentence-splitter sentencex click joblib tqdm
    .venv/bin/pip wheel -q --no-deps -w "$WHEELS" antlr4-python3-runtime==4.9.3
    carry=("$WHEELS")
    if [ -f work/debian/raw/report.json ]; then
      tar -czf "$CORPUS.tmp" -C work/debian raw && mv -f "$CORPUS.tmp" "$CORPUS"
      carry+=("$CORPUS")
    else
      echo "[device_check] no corpus in work/debian/raw: 'study' needs it (bash recipes/wmt14_en_de/debian_corpus.sh)" >&2
    fi
    # shellcheck disable=SC2016
    sent=$(git ls-files -z --cached --others --exclude-standard | .venv/bin/python -c '
import os, sys
files = [f for f in sys.stdin.buffer.read().split(b"\0") if f and os.path.isfile(f)]
files += [c.encode() for c in sys.argv[1:] if os.path.isfile(c)]
files += [os.path.join(d, n).encode() for c in sys.argv[1:] for d, _, ns in os.walk(c) for n in ns]
print(sum(os.path.getsize(f) for f in files))' "${carry[@]}")
    echo "[device_check] wheels in $WHEELS ($(du -sh "$WHEELS" | cut -f1))$([ ${#carry[@]} -eq 1 ] || echo ", the corpus in $CORPUS ($(du -sh "$CORPUS" | cut -f1))")"
    echo "[device_check] a call sends $((sent >> 20)) MiB of at most $((SEND_LIMIT >> 20)) (carry [$(printf '"%s", ' "${carry[@]}" | sed 's/, $//')])"
    if [ "$sent" -gt "$SEND_LIMIT" ]; then
      echo "[device_check] too much for one call: $sent bytes > $SEND_LIMIT (git ls-files and du show what is largest)" >&2
      exit 1
    fi
    ;;
  run)
    OUT=${OUT:-/tmp/device_out}
    mkdir -p "$OUT"
    install_here
    "$PYTHON" -c "import torch, triton; print('[device_check]', torch.__version__, triton.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
    "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_cuda.py > "$OUT/test_cuda.log" 2>&1 \
      && echo "[device_check] tests/test_cuda.py passed" || echo "[device_check] tests/test_cuda.py FAILED: $OUT/test_cuda.log"
    tail -3 "$OUT/test_cuda.log"
    # shellcheck disable=SC2086
    "$PYTHON" -m scripts.gpu_ab --out-json "$OUT/gpu_ab.json" ${GPU_AB_ARGS:-} 2> "$OUT/gpu_ab.log" \
      || { echo "[device_check] gpu_ab FAILED"; tail -20 "$OUT/gpu_ab.log"; exit 1; }
    grep "^\[gpu-ab\]" "$OUT/gpu_ab.log"
    ;;
  study)
    # the real-text comparison (recipes/wmt14_en_de/debian_comparison.sh) at the iwslt_de_en size (6+6 layers,
    # d 512, 4 heads of 128) on the Debian corpus carried from here (carry ["$WHEELS", "$CORPUS"]), sized
    # for one GPU: batches of STUDY_TOKENS (8000) target tokens, PARALLEL_RUNS (4) runs sharing it, the
    # tuning grid TUNE_LRS x TUNE_WARMUPS at TUNE_UPDATES (600), then the convergence search and 3 seeds.
    # A call of the device tool lasts at most 10 minutes: the study stops after STUDY_SECONDS (420) and
    # sends back what it finished, everything it wrote into docs/ as $OUT/study.tar.gz (to be unpacked at
    # the repository's root here and committed: the tuning grid docs/${NAME}_tuning.{md,env}, the budget
    # docs/${NAME}_budget.env, the records of finished runs in docs/records/$NAME, the tables), and its
    # log as $OUT/study.log. The next call goes on from there: it takes the tuned settings and the budget
    # from docs/ where they are and restores every recorded run (run.sh's RECORDS) instead of training it.
    # NAME is debian_iwslt (debian_iwslt_quick with QUICK=1). The knobs are debian_comparison.sh's
    # (QUICK=1: transformer and RoPE only, the grid 2 x 1, for a short device check; MODEL_ARGS:
    # fairseq-train flags replacing the iwslt_de_en size). Rehearsed on a CPU with PYTHON set to a venv
    # that lacks the wheels' packages, a tiny MODEL_ARGS, TUNE_UPDATES=6, CONVERGE_START=12,
    # CONVERGE_STEP=6, FLAT_DROP=1, SAVE_INTERVAL_UPDATES=2, SEEDS=1 SEEDS_rpe=1.
    OUT=${OUT:-/tmp/device_out}
    mkdir -p "$OUT"
    install_here
    if [ ! -f work/debian/raw/report.json ]; then
      [ -f "$CORPUS" ] || { echo "[device_check] neither work/debian/raw nor $CORPUS here (carry it: bash scripts/device_check.sh prepare)" >&2; exit 1; }
      tar -xzf "$CORPUS" -C work/debian
    fi
    quick=$([ "${QUICK:-0}" = 1 ] && echo 1 || echo 0)
    # (the quick check's grid has no Shaw's RPE: its tuned settings must not become the full study's)
    export NAME=${NAME:-debian_iwslt$([ "$quick" = 0 ] || echo _quick)}
    # what earlier calls finished and sent back (committed since): the tuned settings and the budget
    if [ -z "${CHOSEN:-}" ] && [ -f "docs/${NAME}_tuning.env" ]; then export CHOSEN=docs/${NAME}_tuning.env; fi
    if [ -z "${MAX_UPDATE:-}" ] && [ -f "docs/${NAME}_budget.env" ]; then
      MAX_UPDATE=$(sed -n 's/^MAX_UPDATE=//p' "docs/${NAME}_budget.env"); export MAX_UPDATE
    fi
    export VIRTUAL_ENV=${VIRTUAL_ENV:-$(dirname "$(dirname "$(command -v "$PYTHON")")")}
    export WORK_DIR=${STUDY_WORK_DIR:-/tmp/study_work} RAW_OUT=$PWD/work/debian/raw CORPUS_WORK_DIR=$PWD/work/debian \
      OUT_DIR=docs TITLE="Debian manuals (real text), iwslt_de_en size, one GPU" MODEL_ARGS=${MODEL_ARGS:- } \
      TOKENS_PER_UPDATE=${STUDY_TOKENS:-8000} MAX_TOKENS_PER_GPU=${STUDY_TOKENS:-8000} PARALLEL_RUNS=${PARALLEL_RUNS:-4} \
      TUNE_UPDATES=${TUNE_UPDATES:-600} CONVERGE_START=${CONVERGE_START:-1200} CONVERGE_STEP=${CONVERGE_STEP:-600} \
      SAVE_INTERVAL_UPDATES=${SAVE_INTERVAL_UPDATES:-100} SEEDS=${SEEDS:-1 2 3} SEEDS_rpe=${SEEDS_rpe:-1 2 3}
    if [ "$quick" = 1 ]; then
      export ARCHS=${ARCHS:-transformer=transformer_iwslt_de_en rope=rope_transformer_iwslt_de_en} \
        TUNE_LRS=${TUNE_LRS:-5e-4 1e-3} TUNE_WARMUPS=${TUNE_WARMUPS:-500}
      unset SEEDS_rpe
    else
      export ARCHS=${ARCHS:-transformer=transformer_iwslt_de_en rpe=rpe_transformer_iwslt_de_en rope=rope_transformer_iwslt_de_en} \
        TUNE_LRS=${TUNE_LRS:-5e-4 1e-3 2e-3} TUNE_WARMUPS=${TUNE_WARMUPS:-500 2000}
    fi
    started=$(mktemp) && sleep 1  # (files written from here on are the study's)
    status=0
    SEEDS_rpe_transformer="" timeout -k 30 "${STUDY_SECONDS:-420}" bash recipes/wmt14_en_de/debian_comparison.sh \
      > "$OUT/study.log" 2>&1 || status=$?
    # (not what a step stopped in the middle left: its *.tmp / *.part files, a record's <run>.tmp folder)
    find docs -type f -newer "$started" ! -name '*.tmp' ! -name '*.part' ! -path '*.tmp/*' -print0 | sort -z \
      | tar -czf "$OUT/study.tar.gz" --null -T -
    grep -v "^{" "$OUT/study.log" | tail -n 30 || true
    case $status in
      0) what="finished" ;;
      124|137) what="stopped after STUDY_SECONDS=${STUDY_SECONDS:-420} (the next call goes on from what it sent back)" ;;
      *) what="FAILED (exit status $status; $OUT/study.log)" ;;
    esac
    echo "[device_check] study $what; $OUT/study.tar.gz: $(tar -tzf "$OUT/study.tar.gz" | wc -l) files written into docs/" \
      "(unpack here: tar -xzf study.tar.gz)"
    [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || [ "$status" -eq 137 ]
    ;;
  *)
    echo "usage: bash scripts/device_check.sh prepare|run|study" >&2
    exit 2
    ;;
esac
