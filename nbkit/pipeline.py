"""Deprecated: ``nbkit.pipeline`` was split by concern; each old name points to its new home, with a warning.

Kept so that scripts written against the old layout keep running; to be removed in a later release.
"""
from __future__ import annotations

import importlib
import warnings

#: old name -> its new home ``module:name``
MOVED = {
    "predict": "nbkit.evaluate.inference:predict",
    "classification_report": "nbkit.evaluate.metrics:classification_report",
    "compare_reports": "nbkit.evaluate.metrics:compare_reports",
    "format_report": "nbkit.evaluate.metrics:format_report",
    "fit_tfidf_baseline": "nbkit.evaluate.baseline:fit_tfidf_baseline",
    "tfidf_baseline": "nbkit.evaluate.baseline:tfidf_baseline",
    "baseline_at_cut": "nbkit.evaluate.baseline:baseline_at_cut",
    "plateau_check": "nbkit.evaluate.probes:plateau_check",
    "unigram_entropy": "nbkit.evaluate.probes:unigram_entropy",
    "bootstrap_diff": "nbkit.evaluate.stats:bootstrap_diff",
    "plot_confusion_matrix": "nbkit.views.plots:plot_confusion_matrix",
    "LivePlot": "nbkit.views.plots:LivePlot",
    "use_cjk_font": "nbkit.views.fonts:use_cjk_font",
    "export_classifier": "nbkit.models.export:export_classifier",
    "pretraining_texts": "nbkit.recipes.own_data:pretraining_texts",
    "pretraining_corpus": "nbkit.recipes.pretraining:pretraining_corpus",
    "size_run": "nbkit.recipes.sizing:size_run",
    "plan_text": "nbkit.recipes.sizing:plan_text",
    "runs_dir": "nbkit.runs:runs_dir",
    "step_dir": "nbkit.runs:step_dir",
}
#: old names with no one-to-one successor -> what to use instead
REPLACED = {name: "the recipe configs (nbkit.recipes: TokenizerConfig, PretrainConfig, FinetuneConfig, "
                  "ProfileConfig, OwnDataConfig).for_scale(scale, **overrides)"
            for name in ("Scale", "get_scale", "resolve_scale", "knob", "run_tag", "overrides_of")}
REPLACED.update(load_tokenizer="nbkit.recipes.tokenizer.load(scale)",
                pretrained_model_dir="nbkit.recipes.finetuning.default_encoder(scale)",
                own_corpus_store="nbkit.recipes.own_data.corpus_store(cfg, labeled)",
                bootstrap_ci="nbkit.evaluate.stats.bootstrap_diff (a paired comparison)",
                mean_std="numpy.mean and numpy.std(ddof=1)")


def __getattr__(name: str):
    if name in MOVED:
        module, _, attr = MOVED[name].partition(":")
        warnings.warn(f"nbkit.pipeline.{name} moved to {module}.{attr}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), attr)
    if name in REPLACED:
        raise AttributeError(f"nbkit.pipeline.{name} is gone; use {REPLACED[name]}")
    raise AttributeError(f"module 'nbkit.pipeline' has no attribute {name!r}")
