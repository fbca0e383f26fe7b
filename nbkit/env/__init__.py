"""The environment report behind notebook 00 and ``nbkit doctor``: layered checks
(OS, Python, torch, GPUs, Jupyter, Hugging Face, nbkit), each with a fix.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.env.doctor import keep_busy, report

__getattr__, __dir__ = lazy_exports(__name__, __file__)
