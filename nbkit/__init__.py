"""nbkit: a Jupyter-first toolkit for training Chinese BERT models on a GPU.

``import nbkit`` is cheap and never fails because torch, CUDA or NVML is broken:
the environment check (notebook 00, ``nbkit doctor``) must be able to report
exactly that. Heavy imports happen inside the functions that need them; the
names below are resolved lazily on first attribute access. When HOME's cache folder is not
writable, the cache variables that are not set point at a writable temp folder
(:mod:`nbkit.env.caches`, the rule ``docker/entrypoint.sh`` applies).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports
from nbkit.env.caches import ensure_writable_caches

__version__ = "0.1.0"

ensure_writable_caches()   # HOME not writable: HF/matplotlib/jieba caches to $TMPDIR/nbkit-cache-<uid> (D08)

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.gpu.widgets import GpuMonitor
    from nbkit.runs import runs_dir
    from nbkit.views.plots import LivePlot

__getattr__, __dir__ = lazy_exports(__name__, __file__)
