"""Scores from counts, without torch: nbkit's one macro-F1.

The loop's evaluation sums a confusion matrix over batches (and ranks under DDP) and scores
it here; ``nbkit.pipeline.evaluation.classification_report`` and ``nbkit.pipeline.stats.macro_f1``
(bootstrap resamples) build theirs with NumPy and call the same function, so every macro-F1
nbkit prints follows one rule.
"""
from __future__ import annotations

import math


def macro_f1(confusion) -> float:
    """Macro-F1 from a (C, C) confusion matrix (rows true, columns predicted, counts): a tensor or an array.

    F1_c = 2 TP / (2 TP + FP + FN); classes with no example and no prediction (0/0)
    are left out of the mean (sklearn's ``zero_division`` would count them as 0). NaN when
    the matrix is empty.
    """
    import numpy as np

    cm = np.asarray(confusion.detach().cpu() if hasattr(confusion, "detach") else confusion, dtype=np.float64)
    tp = np.diag(cm)
    denom = cm.sum(0) + cm.sum(1)                                     # 2 TP + FP + FN, per class
    seen = denom > 0
    return float(np.mean(2 * tp[seen] / denom[seen])) if seen.any() else math.nan
