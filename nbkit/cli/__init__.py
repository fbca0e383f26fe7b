"""The command line: ``nbkit doctor`` and ``nbkit run-notebooks`` (the headless runner).
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('run_notebooks', 'plan', 'run_all'),
})
