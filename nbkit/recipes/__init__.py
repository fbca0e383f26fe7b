"""Recipes: one per step, a config of that step's settings (defaults per scale, :mod:`nbkit.recipes.scales`)
plus its stages as functions. Notebooks call the stages cell by cell with the config printed, ``nbkit.jobs``
turns the config's fields into flags, ``bench/`` runs them with overrides.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors follow; at run time a name is imported on first use
    from nbkit.recipes.config import resolve_scale
    from nbkit.recipes.finetuning import FinetuneConfig, run_finetuning
    from nbkit.recipes.own_data import OwnDataConfig
    from nbkit.recipes.pretraining import PretrainConfig, run_pretraining
    from nbkit.recipes.profiling import ProfileConfig
    from nbkit.recipes.sizing import plan_text, size_run
    from nbkit.recipes.tokenizer import TokenizerConfig

__getattr__, __dir__ = lazy_exports(__name__, __file__)
