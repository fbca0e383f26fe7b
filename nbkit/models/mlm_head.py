"""Masked-LM head on the masked positions only.

``BertForMaskedLM`` runs its head (transform ``d x d`` + decoder ``d x V``) and
the softmax on every position, although only the ~15 % masked positions carry a
label. For BERT-mini with a 5.7 k vocabulary at T = 128 that head is about 30 %
of the model FLOPs, and its (B, T, V) logits are the largest activation of the
step. Gathering the masked positions first (as NVIDIA's BERT pretraining code
and ModernBERT's "sparse prediction" do) gives the same loss and gradients for
a fraction of the cost; ``bench/mlm_pipeline.py`` measures the difference.

The gather has a data-dependent shape, so the loop uses it only in eager mode
(``TrainConfig(compile=False)``); compiled runs keep the full head and static
shapes.
"""
from __future__ import annotations

import torch
from transformers import BertForMaskedLM
from transformers.modeling_outputs import MaskedLMOutput


class SparseHeadBertForMaskedLM(BertForMaskedLM):
    """``BertForMaskedLM`` whose forward can score only the positions being predicted.

    ``forward(input_ids (B, T), ..., predict_mask=(B, T) bool)`` returns
    ``logits`` (N, V) for the N positions where ``predict_mask`` is True, in
    row-major order (the order of ``labels[predict_mask]``). Without
    ``predict_mask`` it is exactly ``BertForMaskedLM`` (logits (B, T, V)), so
    fill-mask, ``Trainer`` and checkpoints behave as usual; the weights and
    config are the same, and ``BertForMaskedLM.from_pretrained`` loads its
    checkpoints (and it loads theirs).
    """

    supports_predict_mask = True

    def save_pretrained(self, save_directory, *args, **kwargs):
        """``BertForMaskedLM.save_pretrained``, with ``architectures: ["BertForMaskedLM"]`` in config.json.

        ``save_pretrained`` records the class name, and ``SparseHeadBertForMaskedLM``
        exists only in nbkit; tools that read ``architectures`` (serving stacks,
        ``transformers.pipeline``) must see the ``transformers`` class with the
        same weights. The saved directory loads with ``BertForMaskedLM``,
        ``AutoModelForMaskedLM`` and ``pipeline("fill-mask", model=dir)``.
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
    """Logits and the labels they are scored against, for the loop and its evaluation.

    ``forward``: the module to call (plain, DDP-wrapped or compiled); ``batch``:
    model inputs without labels; ``labels``: (B, T) for MLM or (B,) for
    classification, -100 = ignored. With ``sparse`` (a model with
    ``supports_predict_mask`` and MLM labels) returns ``(logits (N, V), labels (N,))``
    for the N label positions, else ``(logits (B, T, V) or (B, C), labels)``.
    """
    if sparse and labels.dim() == 2:
        keep = labels != -100                                          # (B, T)
        return forward(**batch, predict_mask=keep).logits, labels[keep]
    return forward(**batch).logits, labels


def uses_sparse_head(model, compile_: bool | str) -> bool:
    """True when the loop should pass ``predict_mask``: the model supports it and the run is eager."""
    return bool(getattr(model, "supports_predict_mask", False)) and not compile_
