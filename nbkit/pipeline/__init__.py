"""The notebook layer: scale presets, the runs directory, the artifacts each notebook step hands the
next, classifying texts with the fine-tuned model, evaluation and the TF-IDF baseline, the live loss plot,
a CJK font for plots, and notebook 05's own-data glue and export.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.pipeline.artifacts import (
        load_tokenizer,
        pretrained_model_dir,
        steps_for_epochs,
        tokenizer_dir,
        tokenizer_texts,
        train_tokenizer,
    )
    from nbkit.pipeline.baseline import fit_tfidf_baseline, tfidf_baseline
    from nbkit.pipeline.evaluation import classification_report, compare_reports, format_report, plot_confusion_matrix
    from nbkit.pipeline.fonts import CJK_FAMILIES, find_cjk_font, use_cjk_font
    from nbkit.pipeline.inference import predict
    from nbkit.pipeline.owndata import export_classifier, own_corpus_store, pretraining_texts, train_tokenizer_on
    from nbkit.pipeline.params import knob, overrides_of, resolve_scale, run_tag
    from nbkit.pipeline.plateau import PlateauCheck, plateau_check, unigram_entropy
    from nbkit.pipeline.plots import LivePlot
    from nbkit.pipeline.pretraining_text import (
        corpus_store,
        pretraining_corpus,
        store_blocks,
        store_dir_for,
        store_summary,
    )
    from nbkit.pipeline.runs import pretrain_dir, runs_dir, step_dir
    from nbkit.pipeline.scale import Scale, get_scale
    from nbkit.pipeline.sizing import plan_text, size_run
    from nbkit.pipeline.stats import bootstrap_ci, bootstrap_diff, bootstrap_diff_seeds, mean_std
    from nbkit.pipeline.tasks import (
        TASKS,
        baseline_at_cut,
        load_news_task,
        load_task,
        truncate_like_tokenizer,
    )
    from nbkit.settings import SCALES

__getattr__, __dir__ = lazy_exports(__name__, __file__)
