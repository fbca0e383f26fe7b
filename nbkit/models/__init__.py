"""BERT models built from presets or loaded from a checkpoint, the sparse MLM head, and their FLOPs
(per token, against the hardware's peak: MFU).
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('bert', 'PRESETS', 'build_config', 'build_mlm_model', 'build_classifier', 'count_parameters', 'POOLINGS'),
    **names('mlm_head', 'SparseHeadBertForMaskedLM'),
    **names('pooling', 'MeanPoolBertForSequenceClassification'),
    **names('flops', 'mfu', 'peak_tflops', 'bert_flops_per_token'),
})
