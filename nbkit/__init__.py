"""nbkit: a Jupyter-first toolkit for training Chinese BERT models on a GPU.

``import nbkit`` is cheap and never fails because torch, CUDA or NVML is broken:
the environment check (notebook 00, ``nbkit doctor``) must be able to report
exactly that. Heavy imports happen inside the functions that need them; the
names below are resolved lazily on first attribute access.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (imported on first use)
_LAZY = {
    "get_scale": "nbkit.pipeline.scale",
    "Scale": "nbkit.pipeline.scale",
    "runs_dir": "nbkit.pipeline.runs",
    "GpuMonitor": "nbkit.gpu.widgets",
    "LivePlot": "nbkit.pipeline.plots",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nbkit' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
