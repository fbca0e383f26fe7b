"""The ``nbkit`` command (``main``): ``nbkit doctor``, ``nbkit run-notebooks`` (``run_notebooks``),
``nbkit prepare-corpus``."""
