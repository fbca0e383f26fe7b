"""The loss the loop and its evaluation share: cross-entropy summed over label tokens, so accumulation
can divide by the label tokens of the whole window (design.md section 7).
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

from nbkit.errors import ConfigError


def token_loss_sum(logits: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy summed over label tokens (labels != -100), each weighted by its class.

    logits (B, T, V) or (B, C); labels (B, T) or (B,); weight (C,) or None. Returns a scalar (fp32 under
    autocast); divide by :func:`label_weight_sum` of the window for the mean.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), weight=weight,
                           ignore_index=-100, reduction="sum")


def label_weight_sum(labels: torch.Tensor, weight: torch.Tensor | None) -> float:
    """The divisor matching :func:`token_loss_sum`: label tokens, or the sum of their class weights."""
    scored = labels[labels != -100]
    return float(len(scored)) if weight is None else float(weight[scored].sum())


def label_counts(data) -> Counter:
    """Examples per class id in ``data`` (``labels``, else ``label``: one int per example).

    Raises:
        ConfigError: per-token (MLM) labels, or neither field.
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
    """Weight per class, (K,) float32 on CPU, or None for ``spec=None``.

    spec: ``"balanced"`` (``n / (K * count)`` from ``train_data``; 0 for a class absent from it) or K
    non-negative numbers; num_labels: K (None: largest id + 1).

    Raises:
        ConfigError: an unknown ``spec``, a wrong-length, negative or non-finite list, ids outside 0..K-1,
            or per-token labels.
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
