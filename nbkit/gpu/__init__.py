"""GPU telemetry: NVML snapshots and failure states (``nvml``, ``nvml_state``), a background sampler
(``sampler``), the live widget (``widgets``; ``nbkit.GpuMonitor``), training telemetry (``telemetry``).

Nothing here creates a CUDA context; NVML starts lazily on first use. The NVML test double is tests/nvml_fake.py.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.gpu.nvml import Nvml

__getattr__, __dir__ = lazy_exports(__name__, __file__)
