"""Recipes: one per step, a config of that step's fields (defaults per scale) plus its stages as functions.

Notebooks call the stages cell by cell with the config printed; ``nbkit.jobs`` wraps them in argparse;
``bench/`` runs them with overrides.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors follow; at run time a name is imported on first use
    from nbkit.recipes.finetuning import FinetuneConfig, run_finetuning
    from nbkit.recipes.own_data import own_corpus_store, pretraining_texts
    from nbkit.recipes.params import knob, overrides_of, resolve_scale, run_tag
    from nbkit.recipes.pretrain_corpus import (
        corpus_store,
        pretraining_corpus,
        store_blocks,
        store_dir_for,
        store_summary,
    )
    from nbkit.recipes.pretraining import PretrainConfig, run_pretraining
    from nbkit.recipes.scale import Scale, get_scale
    from nbkit.recipes.sizing import plan_text, size_run
    from nbkit.recipes.tasks import TASKS, load_news_task, load_task
    from nbkit.recipes.tokenizer import (
        load_tokenizer,
        pretrained_model_dir,
        steps_for_epochs,
        tokenizer_dir,
        tokenizer_texts,
        train_tokenizer,
        train_tokenizer_on,
    )
    from nbkit.settings import SCALES

__getattr__, __dir__ = lazy_exports(__name__, __file__)
