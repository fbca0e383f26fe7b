"""A BERT sequence classifier on the mean of the token states instead of the pooled ``[CLS]``.

BERT's default head reads ``[CLS]`` through the pooler (dense + tanh), which only the
next-sentence task trains; after MLM-only pretraining (as nbkit's) both are untrained,
so the classifier must learn them from the labels alone. Averaging the non-padding
token states (``attention_mask`` = 1, ``[CLS]``/``[SEP]`` included) uses what MLM did
train, as Sentence-BERT does (Reimers & Gurevych 2019).

This module imports only torch and transformers, so an exported model directory can
carry it as custom code (``register_for_auto_class``): ``AutoModelForSequenceClassification``
and ``transformers.pipeline`` load it with ``trust_remote_code=True`` and get the same
predictions, without nbkit installed. The export's ``config.json`` names
:class:`MeanPoolBertConfig` (``model_type: "nbkit_mean_pool_bert"``): without
``trust_remote_code=True`` transformers refuses it loudly instead of loading the weights
silently as a CLS-pooling ``BertForSequenceClassification``, and with it the class is
registered for its own config, so ``pipeline()`` logs no "not supported" error.
"""
from __future__ import annotations

import torch
from transformers import BertConfig, BertForSequenceClassification
from transformers.modeling_outputs import SequenceClassifierOutput


class MeanPoolBertConfig(BertConfig):
    """``BertConfig`` under a model type of its own, written only to exported mean-pooling models."""

    model_type = "nbkit_mean_pool_bert"


class MeanPoolBertForSequenceClassification(BertForSequenceClassification):
    """``BertForSequenceClassification`` whose head reads the masked mean of the last hidden states.

    Weights and config are BERT's (the unused pooler stays, so checkpoints load both
    ways, but takes no gradient: ``requires_grad=False``, so DDP, which requires every trained
    parameter to get a gradient in each step, does not stop at it); ``config.classifier_pooling =
    "mean"`` records the choice.

    ``forward(input_ids (B, T), attention_mask (B, T), token_type_ids=None, labels=None)``
    returns ``logits`` (B, num_labels), plus the mean cross-entropy ``loss`` when
    ``labels`` (B,) is given (as transformers' heads do; the nbkit loop passes none and
    computes its own).
    """

    config_class = MeanPoolBertConfig   # its own config class: registered for it when loaded as remote code

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        self._freeze_pooler()

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """``BertForSequenceClassification.from_pretrained``, the pooler frozen again (transformers 5 loads the
        weights as new parameters, which would take gradients)."""
        out = super().from_pretrained(*args, **kwargs)
        (out[0] if isinstance(out, tuple) else out)._freeze_pooler()   # output_loading_info=True: (model, info)
        return out

    def _freeze_pooler(self) -> None:
        if self.bert.pooler is not None:
            self.bert.pooler.requires_grad_(False)   # never read by forward(): no gradient, nothing to train

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        kwargs.pop("return_dict", None)
        limit = getattr(self.config, "classifier_max_length", None)
        if input_ids is not None and limit and input_ids.shape[1] > limit:
            input_ids, attention_mask, token_type_ids = truncate(input_ids, attention_mask, token_type_ids, limit)
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, **kwargs).last_hidden_state    # (B, T, d)
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], device=hidden.device)
        m = attention_mask.unsqueeze(-1).to(hidden.dtype)                                 # (B, T, 1)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)                           # (B, d)
        logits = self.classifier(self.dropout(pooled))                                   # (B, C)
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def truncate(input_ids, attention_mask, token_type_ids, limit: int):
    """Cut (B, T) inputs to (B, limit) as the tokenizer's ``truncation=True`` would: the first
    ``limit - 1`` tokens and the row's last real token (``[SEP]``). Right padding assumed.

    An export sets ``config.classifier_max_length``, so an untruncated long text (a plain
    ``pipeline()`` call) gets the same prediction as ``nbkit.pipeline.predict``.
    """
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    n = attention_mask.sum(1)                                                          # (B,)
    last = input_ids.gather(1, (n - 1).clamp(min=0).unsqueeze(1)).squeeze(1)           # (B,)
    ids = input_ids[:, :limit].clone()                                                 # (B, L)
    long_rows = n > limit
    ids[long_rows, limit - 1] = last[long_rows]
    types = token_type_ids[:, :limit] if token_type_ids is not None else None
    return ids, attention_mask[:, :limit], types
