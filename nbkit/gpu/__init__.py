"""GPU telemetry: NVML snapshots and failure states, a background sampler, the live widget,
the training-telemetry callback (the NVML test double lives in tests/nvml_fake.py).

Nothing here creates a CUDA context; NVML starts lazily on first use.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.gpu.nvml import METRICS, DeviceSnapshot, Nvml, Sample, take_sample
    from nbkit.gpu.nvml_state import NvmlState
    from nbkit.gpu.sampler import Sampler
    from nbkit.gpu.telemetry import TelemetryCallback, input_bound_advice
    from nbkit.gpu.widgets import GpuMonitor

__getattr__, __dir__ = lazy_exports(__name__, __file__)
