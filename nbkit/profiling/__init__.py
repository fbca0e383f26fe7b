"""Profiling for notebook 04: torch.profiler summaries, microbenchmarks, the timed step
split and ablations, the bottleneck diagnosis, and the FLOPs/MFU arithmetic.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('profiler', 'profile_steps', 'make_step_fn', 'format_table'),
    **names('microbench', 'matmul_bench', 'sdpa_bench', 'h2d_bench'),
    **names('stepdata', 'model_factory', 'step_loop', 'ids_tokenizer'),
    **names('steps', 'StepConfig', 'PhaseTimer', 'measure_steps', 'ablation', 'gpu_utilization_during'),
    **names('diagnosis', 'diagnose'),
    **names('flops', 'mfu', 'peak_tflops', 'bert_flops_per_token'),
})
