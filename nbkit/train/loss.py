"""The loss the loop and its evaluation share: cross-entropy summed over label tokens.

Summed, not averaged, so gradient accumulation can divide by the label tokens of the
whole accumulation window (design.md section 7).
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

from nbkit.errors import ConfigError


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


def label_counts(data) -> Counter:
    """Examples per class id in ``data`` (its ``labels``, else ``label``: one int per example).

    Raises ``ConfigError`` when examples carry a label per token (MLM), where class
    weights do not apply, or have neither field.
    """
    names = getattr(data, "column_names", None) or list(data[0])
    key = next((k for k in ("labels", "label") if k in names), None)
    if key is None:
        raise ConfigError(f"class_weights needs the training labels, but the examples have no 'labels' or 'label' "
                          f"(fields: {names}); encode with text.encode_classification, or class_weights=None")
    labels = data[key] if getattr(data, "column_names", None) else [data[i][key] for i in range(len(data))]
    counts: Counter = Counter()
    for y in labels:
        if hasattr(y, "dim") and y.dim() == 0:
            y = int(y)
        if not isinstance(y, int):
            raise ConfigError("class_weights applies to sequence classification (one int label per example); "
                              "these examples have a label per token (MLM). Use class_weights=None.")
        counts[y] += 1
    return counts


def class_weights(spec, train_data, num_labels: int | None) -> torch.Tensor | None:
    """The weight per class, shape (K,), float32 on CPU; None for ``spec=None``.

    Args:
        spec: ``None`` (plain cross-entropy), ``"balanced"`` (from ``train_data``'s
            counts, see the module docstring; a class absent from training gets 0:
            it is never a target) or a sequence of K non-negative numbers.
        train_data: the loop's training data (``labels``: one class id per example).
        num_labels: K, the model's ``config.num_labels`` (None: largest id + 1).

    Raises:
        ConfigError: unknown ``spec``, a list of the wrong length or with a negative /
            non-finite value, label ids outside 0..K-1, or per-token labels.
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec != "balanced":
            raise ConfigError(f"class_weights={spec!r}: use 'balanced', a list of one weight per class, or None")
        counts = label_counts(train_data)
        k = num_labels or max(counts) + 1
        bad = sorted(c for c in counts if not 0 <= c < k)
        if bad:
            raise ConfigError(f"label ids {bad} are outside 0..{k - 1} (the model has {k} labels); "
                              "build the model with num_labels covering every class")
        n = sum(counts.values())
        return torch.tensor([n / (k * counts[c]) if counts[c] else 0.0 for c in range(k)], dtype=torch.float32)
    weights = [float(w) for w in spec]
    if num_labels is not None and len(weights) != num_labels:
        raise ConfigError(f"class_weights has {len(weights)} entries but the model has {num_labels} labels; "
                          "give one weight per class id (or class_weights='balanced')")
    if any(not math.isfinite(w) or w < 0 for w in weights) or not any(weights):
        raise ConfigError(f"class_weights={weights} must be finite, >= 0 and not all 0")
    return torch.tensor(weights, dtype=torch.float32)
