#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv and install nbkit with its test extras.
#   TORCH_SPEC   torch requirement installed first (default: torch==2.13.0; on a
#                GPU box pick the CUDA build you want, e.g. "torch==2.9.1").
#   NBKIT_PYTHON interpreter used to create the venv (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${NBKIT_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch can pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 >/dev/null
