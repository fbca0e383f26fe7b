"""Evaluation: classification metrics and reports, the TF-IDF baseline, predictions with a fine-tuned model,
MLM probes (fill-mask, the unigram plateau), seed statistics and the pretraining-value table.
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.evaluate.baseline import baseline_at_cut, fit_tfidf_baseline, tfidf_baseline
    from nbkit.evaluate.inference import predict
    from nbkit.evaluate.metrics import classification_report, compare_reports, format_report
    from nbkit.evaluate.probes import PlateauCheck, fill_mask, plateau_check, unigram_entropy
    from nbkit.evaluate.stats import bootstrap_ci, bootstrap_diff, bootstrap_diff_seeds, mean_std

__getattr__, __dir__ = lazy_exports(__name__, __file__)
