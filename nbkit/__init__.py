"""nbkit: a Jupyter-first toolkit for training Chinese BERT models on a GPU.

``import nbkit`` is cheap, sets no environment variable and works with a broken torch, CUDA or NVML (the
environment check reports them); the names below are imported on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

__version__ = "0.1.0"

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.gpu.widgets import GpuMonitor
    from nbkit.views.plots import LivePlot

__getattr__, __dir__ = lazy_exports(__name__, __file__)
