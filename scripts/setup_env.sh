#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with fairseq-rope and everything it runs with.
#   VENV        where to put it (default: .venv in the repository)
#   PYTHON      interpreter to build it from (default: python3; 3.10 to 3.13, see README "Python versions")
#   TORCH_SPEC  the torch to install first when the venv has none (default: torch==2.13.0; from
#               PyPI on Linux x86_64 that is a CUDA 13 build, which also runs on a CPU)
#   TORCH_INDEX_URL  where to take that torch from instead of PyPI, e.g.
#               https://download.pytorch.org/whl/cpu (CPU only, small) or the index pytorch.org's
#               selector gives for older CUDA drivers; a torch already in the venv is kept
#   EXTRAS      pip extras of fairseq-rope (default: test,plots)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$repo/.venv}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
EXTRAS=${EXTRAS:-test,plots}

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "[setup] installing $TORCH_SPEC${TORCH_INDEX_URL:+ from $TORCH_INDEX_URL} (first, so that no other torch build is pulled in)"
  pip install "$TORCH_SPEC" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
if ! (cd / && "$VENV/bin/python" -c "import fairseq_rope, pytest, xdist, matplotlib, ctranslate2") >/dev/null 2>&1; then
  echo "[setup] installing fairseq-rope[$EXTRAS] and its dependencies (fairseq-fixed builds from source: ~5 min the first time)"
  pip install -e "$repo[$EXTRAS]"
fi
echo "[setup] ready: $("$VENV/bin/python" -c 'import torch, fairseq, fairseq_rope; print(f"torch {torch.__version__}, fairseq {fairseq.__version__}, fairseq-rope {fairseq_rope.__version__}")' 2>/dev/null)"
echo "[setup] activate it with: . $VENV/bin/activate"
