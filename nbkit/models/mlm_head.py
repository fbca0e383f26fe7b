"""Masked-LM head on the masked positions only (NVIDIA's BERT pretraining, ModernBERT's sparse prediction).

Only the ~15 % masked positions carry a label, yet ``BertForMaskedLM`` runs its head (``d x d`` + ``d x V``)
and builds (B, T, V) logits everywhere; gathering the masked positions first gives the same loss and
gradients for a fraction of the cost. Its shapes depend on the data, so compiled runs keep the full head.
"""
from __future__ import annotations

import torch
from transformers import BertForMaskedLM
from transformers.modeling_outputs import MaskedLMOutput


class SparseHeadBertForMaskedLM(BertForMaskedLM):
    """``BertForMaskedLM`` whose forward can score only the positions being predicted.

    ``forward(input_ids (B, T), ..., predict_mask=(B, T) bool)`` -> ``logits`` (N, V) for the N True
    positions, in the order of ``labels[predict_mask]``; without ``predict_mask`` exactly ``BertForMaskedLM``.
    Same weights and config: the two classes load each other's checkpoints.
    """

    supports_predict_mask = True

    def save_pretrained(self, save_directory, *args, **kwargs):
        """``save_pretrained`` with ``architectures: ["BertForMaskedLM"]`` in config.json, so tools that read it
        (``pipeline("fill-mask")``, ``AutoModelForMaskedLM``) load the directory without nbkit.
        """
        result = super().save_pretrained(save_directory, *args, **kwargs)
        self.config.architectures = [BertForMaskedLM.__name__]
        if kwargs.get("is_main_process", True):
            self.config.save_pretrained(save_directory)
        return result

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None,
                predict_mask: torch.Tensor | None = None, **kwargs):
        if predict_mask is None:
            return super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                   token_type_ids=token_type_ids, **kwargs)
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, **kwargs).last_hidden_state  # (B, T, d)
        return MaskedLMOutput(logits=self.cls(hidden[predict_mask]))                    # (N, V)


def forward_logits(forward, batch: dict, labels: torch.Tensor, sparse: bool):
    """``(logits, labels)`` to score, for the loop and its evaluation. ``forward``: the plain, DDP-wrapped or
    compiled module; ``labels`` (B, T) or (B,), -100 ignored. With ``sparse`` and MLM labels: logits (N, V)
    and labels (N,) at the N label positions; else logits (B, T, V) or (B, C) and ``labels``.
    """
    if sparse and labels.dim() == 2:
        keep = labels != -100                                          # (B, T)
        return forward(**batch, predict_mask=keep).logits, labels[keep]
    return forward(**batch).logits, labels


def uses_sparse_head(model, compile_: bool | str) -> bool:
    """True when the loop should pass ``predict_mask``: the model supports it and the run is eager."""
    return bool(getattr(model, "supports_predict_mask", False)) and not compile_
