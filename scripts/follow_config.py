#!/usr/bin/env python3
"""Follow the config through one smoke pretraining run (``run_pretraining`` at max_steps 2): the nbkit modules
entered, in order, by the calls that hold a PretrainConfig (default) or by every call in the config layers
(``--glue``: recipes, jobs, runs, settings). Prints the stays (runs of consecutive calls in one module), the
distinct modules and the returns (stays in a module already left): how often a reader following ``cfg`` jumps.
Usage: ``PYTHONPATH=<checkout> .venv/bin/python scripts/follow_config.py [--glue]`` (any nbkit revision)."""
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ["NBKIT_SCALE"] = "smoke"
os.environ["NBKIT_RUNS_DIR"] = tempfile.mkdtemp()
import nbkit
from nbkit.recipes.pretraining import PretrainConfig, run_pretraining

ROOT = os.path.dirname(nbkit.__file__)
seq = []
GLUE = None if '--glue' not in sys.argv else {'recipes', 'pipeline', 'jobs'}
def prof(frame, event, arg):
    if event != "call":
        return
    f = frame.f_code.co_filename
    if not f.startswith(ROOT):
        return
    mod = os.path.relpath(f, os.path.dirname(ROOT))[:-3].replace("/", ".")
    if GLUE is None:
        if any(isinstance(v, PretrainConfig) for v in frame.f_locals.values()):
            seq.append((mod, frame.f_code.co_name))
    elif mod.split(".")[1] in GLUE or mod in ("nbkit.runs", "nbkit.settings"):
        seq.append((mod, frame.f_code.co_name))
cfg = PretrainConfig.for_scale("smoke", max_steps=2, eval_every=1, progress=False)
sys.setprofile(prof)
try:
    run_pretraining(cfg)
finally:
    sys.setprofile(None)
stays, seen, returns = [], set(), 0
for mod, fn in seq:
    if not stays or stays[-1][0] != mod:
        if mod in seen:
            returns += 1
        seen.add(mod)
        stays.append([mod, [fn]])
    else:
        stays[-1][1].append(fn)
print(f"calls receiving the config: {len(seq)}; stays: {len(stays)} in {len(seen)} modules; returns: {returns}")
for mod, fns in stays:
    print(f"  {mod}: {', '.join(dict.fromkeys(fns))}")
