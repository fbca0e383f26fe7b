"""The command line: ``nbkit doctor`` and ``nbkit run-notebooks`` (the headless runner).
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.cli.run_notebooks import plan, run_all

__getattr__, __dir__ = lazy_exports(__name__, __file__)
