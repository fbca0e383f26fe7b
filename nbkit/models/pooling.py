"""A BERT sequence classifier on the mean of the token states instead of the pooled ``[CLS]``.

After MLM-only pretraining BERT's pooler and ``[CLS]`` state are untrained (only next-sentence
prediction trains them); the masked mean of the token states uses what MLM trained (Sentence-BERT,
Reimers & Gurevych 2019). Torch and transformers only: an export carries this file as custom code, and
its ``config.json`` names :class:`MeanPoolBertConfig`, so transformers refuses it without
``trust_remote_code=True`` rather than load it as a CLS classifier.
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

    ``forward(input_ids (B, T), attention_mask (B, T), token_type_ids=None, labels=None)`` -> ``logits``
    (B, num_labels), plus the mean CE ``loss`` when ``labels`` (B,) are given. The unused pooler stays (the
    weights load both ways) but is frozen: DDP requires a gradient for every trained parameter.
    """

    config_class = MeanPoolBertConfig   # its own config class: registered for it when loaded as remote code

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        self._freeze_pooler()

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """``BertForSequenceClassification.from_pretrained``, with the pooler frozen again."""
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
    """Cut (B, T) inputs to (B, limit) as ``truncation=True`` would: the first ``limit - 1`` tokens and the
    row's last real token (``[SEP]``); right padding assumed. Used when ``config.classifier_max_length`` is set.
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
