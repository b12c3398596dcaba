#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with fairseq-rope and everything it runs with.
#   VENV        where to put it (default: .venv in the repository)
#   PYTHON      interpreter to build it from (3.10 to 3.13, see docs/installation.md "Python versions").
#               Default: a Python 3.12 when one is installed (on PATH as python3.12, or under pyenv),
#               because fairseq-fixed ships a prebuilt wheel for CPython 3.12 only: nothing to
#               compile. Otherwise python3, for which pip builds fairseq-fixed from source (its C++
#               extensions: needs g++, ~4-5 minutes). An existing venv keeps its interpreter.
#   TORCH_SPEC  the torch to install first when the venv has none (default: torch==2.13.0; from
#               PyPI on Linux x86_64 that is a CUDA 13 build, which also runs on a CPU)
#   TORCH_INDEX_URL  where to take that torch from instead of PyPI, e.g.
#               https://download.pytorch.org/whl/cpu (CPU only, small) or the index pytorch.org's
#               selector gives for older CUDA drivers; a torch already in the venv is kept
#   EXTRAS      pip extras of fairseq-rope (default: test,plots)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$repo/.venv}

# a working Python 3.12 interpreter with venv, or nothing
find_python312() {
  local candidate
  for candidate in "$(command -v python3.12 2>/dev/null || true)" \
      $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3.12 2>/dev/null); do
    if [ -n "$candidate" ] && "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-}
EXTRAS=${EXTRAS:-test,plots}

if [ ! -x "$VENV/bin/python" ]; then
  if [ -n "${PYTHON:-}" ]; then
    why="PYTHON=$PYTHON"
  elif PYTHON=$(find_python312); then
    why="Python 3.12 found: fairseq-fixed has a prebuilt wheel for it (no compiler needed); set PYTHON= to choose another"
  else
    PYTHON=python3
    why="no Python 3.12 found, for which fairseq-fixed has a prebuilt wheel: pip builds it from source (needs g++, ~4-5 min)"
  fi
  command -v "$PYTHON" > /dev/null || { echo "[setup] ERROR: PYTHON=$PYTHON not found" >&2; exit 1; }
  echo "[setup] creating virtual environment $VENV with $("$PYTHON" --version) ($PYTHON): $why"
  "$PYTHON" -m venv "$VENV"
else
  echo "[setup] using the virtual environment $VENV ($("$VENV/bin/python" --version))"
fi
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "[setup] installing $TORCH_SPEC${TORCH_INDEX_URL:+ from $TORCH_INDEX_URL} (first, so that no other torch build is pulled in)"
  pip install "$TORCH_SPEC" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
if ! (cd / && "$VENV/bin/python" -c "import fairseq_rope, pytest, xdist, matplotlib, ctranslate2") >/dev/null 2>&1; then
  if "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] == (3, 12))'; then
    note="fairseq-fixed builds from source on this Python: ~4-5 min the first time"
  else
    note="fairseq-fixed from its prebuilt wheel"
  fi
  echo "[setup] installing fairseq-rope[$EXTRAS] and its dependencies ($note)"
  pip install -e "$repo[$EXTRAS]"
fi
echo "[setup] ready: $("$VENV/bin/python" -c 'import torch, fairseq, fairseq_rope; print(f"torch {torch.__version__}, fairseq {fairseq.__version__}, fairseq-rope {fairseq_rope.__version__}")' 2>/dev/null)"
echo "[setup] activate it with: . $VENV/bin/activate"
