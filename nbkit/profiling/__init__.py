"""Profiling for notebook 04: torch.profiler summaries, microbenchmarks, the timed step
split and ablations, the bottleneck diagnosis (FLOPs, peaks and MFU: ``nbkit.models.flops``).
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('profiler', 'profile_steps', 'make_step_fn', 'format_table'),
    **names('microbench', 'matmul_bench', 'sdpa_bench', 'h2d_bench'),
    **names('stepdata', 'model_factory', 'random_mlm_loader'),
    **names('steps', 'StepConfig', 'measure_steps', 'ablation', 'gpu_utilization_during'),
    **names('diagnosis', 'diagnose'),
})
