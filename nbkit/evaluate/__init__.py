"""Evaluation: classification and NER metrics, the TF-IDF, CRF and n-gram baselines, predictions, MLM probes,
text generation, seed statistics."""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.evaluate.baseline import baseline_at_cut, fit_tfidf_baseline, tfidf_baseline
    from nbkit.evaluate.generation import generate
    from nbkit.evaluate.inference import predict, predict_tags
    from nbkit.evaluate.metrics import classification_report, compare_reports, format_report
    from nbkit.evaluate.ner import CrfTagger, crf_baseline, entity_f1_diff, entity_f1_interval, entity_scores
    from nbkit.evaluate.ngram import NgramLM, causal_baselines, store_stream
    from nbkit.evaluate.probes import plateau_check

__getattr__, __dir__ = lazy_exports(__name__, __file__)
