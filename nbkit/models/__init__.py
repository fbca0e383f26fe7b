"""BERT models built from presets or loaded from a checkpoint, the sparse MLM head, GPT-2 / Llama causal LMs,
LoRA adapters, and their FLOPs (per token, against the hardware's peak: MFU).
"""
from typing import TYPE_CHECKING

from nbkit._lazy import lazy_exports

if TYPE_CHECKING:  # what editors and type checkers follow; at run time a name is imported on first use
    from nbkit.models.bert import POOLINGS, PRESETS, build_classifier, build_config, build_mlm_model, count_parameters
    from nbkit.models.causal import build_causal_model, load_causal_model
    from nbkit.models.export import export_causal_lm, export_classifier
    from nbkit.models.flops import bert_flops_per_token, causal_flops_per_token, mfu, peak_tflops
    from nbkit.models.lora import apply_lora, export_adapter, export_merged, trainable_parameters
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM
    from nbkit.models.pooling import MeanPoolBertForSequenceClassification

__getattr__, __dir__ = lazy_exports(__name__, __file__)
