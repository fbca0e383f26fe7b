#!/usr/bin/env bash
# The main job, headless: set up .venv and execute the notebooks (00, 01, ...) in order.
# Executed copies land in $NBKIT_RUNS_DIR/<scale>/executed/ (default runs/).
#   NBKIT_SCALE=smoke|cpu|gpu   (default: gpu if CUDA is usable, else cpu)
#   NBKIT_SKIP_SETUP=1          skip scripts/setup.sh (use .venv as it is; it must exist)
# Arguments go to `nbkit run-notebooks` (--only 01 02, --timeout SECONDS, --scale).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${NBKIT_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
# exec: a SIGTERM to this script (docker stop, kill PID) reaches the runner, which interrupts the kernel first
exec .venv/bin/python -m nbkit.cli.main run-notebooks "$@"
