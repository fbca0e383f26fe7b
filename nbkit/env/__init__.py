"""The environment report behind notebook 00 and ``nbkit doctor``: layered checks
(OS, Python, torch, GPUs, Jupyter, Hugging Face, nbkit), each with a fix.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('doctor', 'Report', 'report', 'doctor_main', 'matmul_throughput', 'keep_busy'),
    **names('checks', 'Check'),
})
