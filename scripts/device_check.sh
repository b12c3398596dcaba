#!/usr/bin/env bash
# The prepared GPU run, for a lent machine with PyTorch and Triton but no network (developer tool).
#
#   bash scripts/device_check.sh prepare   # here: the wheels fairseq-rope needs beside torch, into .device_wheels/
#   bash scripts/device_check.sh run       # there: install them, tests/test_cuda.py, scripts/gpu_ab.py
#   bash scripts/device_check.sh study     # there: the real-text comparison at the iwslt_de_en size (below)
#
# `run` writes into $OUT (default /tmp/device_out): test_cuda.log, gpu_ab.json (written after every step,
# so a cut run keeps what it measured) and gpu_ab.log. GPU_AB_ARGS adds scripts/gpu_ab.py flags
# (e.g. "--budget-s 200"). About 7 minutes on one H100/H200 with the machine's start.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=.device_wheels
PYTHON=${PYTHON:-python3}

case "${1:-}" in
  prepare)
    # no torch (the machine has its own) and no dependency resolution (it would fetch torch): the list is
    # fairseq-fixed's, sacrebleu's and fairseq-rope's own requirements, as the CPU venv has them
    # antlr4-python3-runtime 4.9.3 has no wheel on PyPI: built here from its pure-Python sdist
    mkdir -p "$WHEELS"
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$WHEELS" \
      fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray sacrebleu==2.6.0 portalocker tabulate \
      colorama lxml regex sacremoses subword-nmt sentencex sentencepiece click joblib tqdm
    .venv/bin/pip wheel -q --no-deps -w "$WHEELS" antlr4-python3-runtime==4.9.3
    echo "[device_check] wheels in $WHEELS ($(du -sh "$WHEELS" | cut -f1)); run there with carry [\"$WHEELS\"]"
    ;;
  run)
    OUT=${OUT:-/tmp/device_out}
    mkdir -p "$OUT"
    "$PYTHON" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl
    "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation -e .
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
    # d 512, 4 heads of 128) on the Debian corpus carried from here (carry ["$WHEELS", "work/debian/raw"]),
    # sized for one GPU: batches of STUDY_TOKENS (8000) target tokens, PARALLEL_RUNS (4) runs sharing it,
    # the tuning grid TUNE_LRS x TUNE_WARMUPS at TUNE_UPDATES (600), then the convergence search and 3
    # seeds. Every step writes as it ends, so a cut run keeps what it finished: $OUT/study holds the tables,
    # $OUT/work/tune the tuning logs. The knobs are debian_comparison.sh's (QUICK=1: transformer and RoPE
    # only, the grid 2 x 1, for a short device check).
    OUT=${OUT:-/tmp/device_out}
    mkdir -p "$OUT/study"
    "$PYTHON" -m pip install -q --no-index --no-deps "$WHEELS"/*.whl
    "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation -e .
    [ -f work/debian/raw/report.json ] || { echo "[device_check] work/debian/raw not carried (debian_corpus.sh builds it)" >&2; exit 1; }
    quick=$([ "${QUICK:-0}" = 1 ] && echo 1 || echo 0)
    export VIRTUAL_ENV=${VIRTUAL_ENV:-$(dirname "$(dirname "$(command -v "$PYTHON")")")}
    export WORK_DIR=$OUT/work RAW_OUT=$PWD/work/debian/raw CORPUS_WORK_DIR=$PWD/work/debian OUT_DIR=$OUT/study \
      NAME=debian_iwslt TITLE="Debian manuals (real text), iwslt_de_en size, one GPU" MODEL_ARGS=" " \
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
    SEEDS_rpe_transformer="" bash recipes/wmt14_en_de/debian_comparison.sh 2>&1 | tee "$OUT/study/study.log" | grep -v "^{" || true
    ls "$OUT/study"
    ;;
  *)
    echo "usage: bash scripts/device_check.sh prepare|run|study" >&2
    exit 2
    ;;
esac
