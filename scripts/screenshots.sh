#!/usr/bin/env bash
# Regenerate the README images in docs/img/ from a real browser run (tests/browser/):
#   docs/img/02_training.png          notebook 02 mid-training: live loss plot + GPU widget
#   docs/img/03_confusion_matrix.png  notebook 03's confusion matrix
# Runs notebooks 00-03 through JupyterLab in headless Chromium at smoke scale and keeps
# every screenshot in $NBKIT_ARTIFACTS (default artifacts/browser/).
#   PYTHON   interpreter of the venv (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PYTHON="$PY" scripts/browser_deps.sh >/dev/null
export NBKIT_ARTIFACTS=${NBKIT_ARTIFACTS:-artifacts/browser}
rm -f "$NBKIT_ARTIFACTS"/*-midrun.png "$NBKIT_ARTIFACTS"/*-confusion.png  # never copy a stale image
# 00-03 in order: 02 needs 01's tokenizer, 03 may use 02's checkpoint.
"$PY" -m pytest -q -p no:cacheprovider -m browser tests/browser/test_jupyterlab.py \
    -k "runs_clean and (00_ or 01_ or 02_ or 03_)"
mkdir -p docs/img
copy() {  # copy <glob in artifacts> <dest>
    local src
    src=$(ls "$NBKIT_ARTIFACTS"/$1 2>/dev/null | head -1)
    if [ -z "$src" ]; then echo "screenshots: no $NBKIT_ARTIFACTS/$1 (did the notebook show it?)" >&2; exit 1; fi
    cp "$src" "$2" && echo "$2 <- $src"
}
copy '02_*-midrun.png' docs/img/02_training.png
copy '03_*-confusion.png' docs/img/03_confusion_matrix.png
