#!/usr/bin/env bash
# Set up .venv and run every test: unit tests, then the notebooks under nbval at smoke scale.
# Extra arguments go to pytest (e.g. scripts/test.sh -k data).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NBKIT_SCALE=smoke
export NBKIT_RUNS_DIR=${NBKIT_RUNS_DIR:-$(mktemp -d)/runs}
export MPLBACKEND=Agg
.venv/bin/python -m pytest --nbval -p no:cacheprovider tests notebooks "$@"
