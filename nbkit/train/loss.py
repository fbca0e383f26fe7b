"""The loss the loop and its evaluation share: cross-entropy summed over label tokens.

Summed, not averaged, so gradient accumulation can divide by the label tokens of the
whole accumulation window (design.md section 7).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over label tokens (labels != -100).

    logits: (B, T, V) for MLM or (B, C) for classification; labels: (B, T) or (B,).
    Returns a scalar (fp32 under autocast, which runs cross_entropy in fp32).
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100, reduction="sum")
