"""The loss the loop and its evaluation share: cross-entropy summed over label tokens.

Summed, not averaged, so gradient accumulation can divide by the label tokens of the
whole accumulation window (design.md section 7).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy summed over label tokens (labels != -100), each weighted by its class.

    logits: (B, T, V) for MLM or (B, C) for classification; labels: (B, T) or (B,);
    weight: (C,) class weights or None (all 1). Returns sum_i weight[y_i] * CE_i, a
    scalar (fp32 under autocast, which runs cross_entropy in fp32); divide by
    :func:`label_weight_sum` over the accumulation window for the mean.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), weight=weight,
                           ignore_index=-100, reduction="sum")


def label_weight_sum(labels: torch.Tensor, weight: torch.Tensor | None) -> float:
    """The divisor matching :func:`token_loss_sum`: label tokens, or the sum of their class weights."""
    scored = labels[labels != -100]
    return float(len(scored)) if weight is None else float(weight[scored].sum())
