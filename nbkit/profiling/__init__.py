"""Profiling for notebook 04: torch.profiler summaries, microbenchmarks, the timed step
split and ablations, the bottleneck diagnosis (FLOPs, peaks and MFU: ``nbkit.models.flops``).
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.profiling.diagnosis import diagnose
    from nbkit.profiling.microbench import h2d_bench, matmul_bench, sdpa_bench
    from nbkit.profiling.profiler import format_table, make_step_fn, profile_steps
    from nbkit.profiling.step_timing import (
        StepConfig,
        ablation,
        gpu_utilization_during,
        measure_steps,
        model_factory,
        step_loop,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)
