"""Recipes: one per task, a small config of that step's fields (defaults per scale) plus its stages as functions.

Notebooks call the stages cell by cell with the config printed; ``nbkit.jobs`` wraps them in argparse;
``bench/`` runs them with overrides. ``finetune``: :mod:`nbkit.recipes.finetuning`; ``pretrain``: :mod:`nbkit.recipes.pretraining`.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors follow; at run time a name is imported on first use
    from nbkit.recipes.finetuning import FinetuneConfig, run_finetuning
    from nbkit.recipes.pretraining import PretrainConfig, run_pretraining

__getattr__, __dir__ = lazy_exports(__name__, __file__)
