#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv and install torch, then nbkit (editable).
# By default only what the notebooks need at run time; scripts/test.sh adds the test tools.
#   TORCH_SPEC      torch requirement installed first (default: torch==2.13.0)
#   TORCH_INDEX_URL index for the torch install only (pip --index-url); empty: pip's own
#                   configured indexes. Unset: scripts/torch_index.sh picks it and says why:
#                   a local torch wheel pip already finds (as on this project's CI) -> that one,
#                   offline; no NVIDIA driver -> https://download.pytorch.org/whl/cpu; a driver
#                   -> the newest CUDA build (cu130/cu128/cu126) that `nvidia-smi` says it supports.
#                   An explicit TORCH_SPEC or TORCH_INDEX_URL skips that choice.
#   NBKIT_EXTRAS    nbkit extras (default: none; NBKIT_EXTRAS=test adds pytest, playwright,
#                   hadolint, ruff, pre-commit, which scripts/test.sh needs). jupytext and
#                   papermill are runtime dependencies: always installed.
#   NBKIT_PYTHON    interpreter used to create the venv (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${NBKIT_PYTHON:-python3}
EXTRAS=${NBKIT_EXTRAS-}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch can pull a multi-GB CUDA build.
TORCH_INDEX=()
INDEX_URL=$(scripts/torch_index.sh .venv/bin/python)   # prints its reason on stderr
if [ -n "$INDEX_URL" ]; then TORCH_INDEX=(--index-url "$INDEX_URL"); fi
.venv/bin/python -m pip install -q "${TORCH_INDEX[@]}" "${TORCH_SPEC:-torch==2.13.0}"
.venv/bin/python -m pip install -q -e ".${EXTRAS:+[$EXTRAS]}"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
# Trust the committed notebooks (stored without outputs) so JupyterLab opens them without
# "Notebook ... is not trusted"; the signatures go to this user's Jupyter data dir.
.venv/bin/python -m jupyter trust notebooks/[0-9][0-9]_*.ipynb >/dev/null
