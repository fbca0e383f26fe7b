"""GPU telemetry: NVML snapshots and failure states, a background sampler, the live widget,
the training-telemetry callback, and an NVML test double.

Nothing here creates a CUDA context; NVML starts lazily on first use.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('nvml', 'Nvml', 'DeviceSnapshot', 'Sample', 'METRICS', 'take_sample'),
    **names('nvml_state', 'NvmlState'),
    **names('sampler', 'Sampler'),
    **names('widgets', 'GpuMonitor'),
    **names('telemetry', 'TelemetryCallback', 'input_bound_advice'),
})
