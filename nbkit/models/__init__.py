"""BERT models built from presets or loaded from a checkpoint, and the sparse MLM head.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('bert', 'PRESETS', 'build_config', 'build_mlm_model', 'build_classifier', 'count_parameters', 'POOLINGS'),
    **names('mlm_head', 'SparseHeadBertForMaskedLM'),
    **names('pooling', 'MeanPoolBertForSequenceClassification'),
})
