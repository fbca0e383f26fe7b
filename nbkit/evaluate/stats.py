"""Honest statistics for a model comparison: several seeds, spread, bootstrap intervals.

A 1-point accuracy difference between two single runs is often noise: two fine-tunings
that differ only in their seed differ by 1-2 points on the 1,736 test reviews. So a claim
"A beats B" reports

- the mean and sample standard deviation over seeds (:func:`mean_std`), and
- a percentile bootstrap 95 % interval (Efron & Tibshirani 1993, ch. 13) over test
  examples: resample the test set with replacement ``n_boot`` times, recompute the metric
  (or the difference of two systems' metrics on the *same* resample, which keeps their
  pairing), and take the 2.5th and 97.5th percentiles (:func:`bootstrap_ci`,
  :func:`bootstrap_diff`). Several seeds' predictions are pooled by averaging the metric
  over seeds inside each resample.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from nbkit.errors import DataError

Metric = Callable[..., float]


def accuracy(y_true, y_pred) -> float:
    """Fraction of examples with ``y_pred == y_true`` (0-1)."""
    import numpy as np

    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def macro_f1(y_true, y_pred) -> float:
    """Unweighted mean of per-class F1 over the classes present in either array (``(N,)`` class ids each).

    The confusion matrix goes to :func:`nbkit.evaluate.metrics.macro_f1`, the one macro-F1 the
    loop's evaluation and :func:`nbkit.evaluate.metrics.classification_report` use too.
    """
    import numpy as np

    from nbkit.evaluate.metrics import macro_f1 as from_confusion

    true, pred = np.asarray(y_true).astype(np.int64).ravel(), np.asarray(y_pred).astype(np.int64).ravel()
    ids = np.unique(np.concatenate([true, pred]))                         # (K,) sorted class ids
    k = len(ids)
    cells = np.searchsorted(ids, true) * k + np.searchsorted(ids, pred)   # (N,) row-major cell index
    return from_confusion(np.bincount(cells, minlength=k * k).reshape(k, k))


def mean_std(values: Sequence[float]) -> dict:
    """``{"mean", "std", "n"}``; ``std`` is the sample standard deviation (ddof=1), ``None`` for one value.

    Raises:
        DataError: no values.
    """
    vals = [float(v) for v in values]
    if not vals:
        raise DataError("mean_std needs at least one value")
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    return {"mean": mean, "std": std, "n": len(vals)}


def _as_runs(y_pred):
    """(R, N) int array: one row per seed's predictions."""
    import numpy as np

    arr = np.asarray(y_pred)
    return arr[None, :] if arr.ndim == 1 else arr


def _check(y_true, runs) -> None:
    if runs.shape[1] != len(y_true) or len(y_true) == 0:
        raise DataError(f"predictions cover {runs.shape[1]} examples but y_true has {len(y_true)}; "
                        "pass one prediction per test example (per seed: shape (seeds, N))")


def bootstrap_ci(y_true, y_pred, metric: Metric = accuracy, n_boot: int = 1000, level: float = 0.95,
                 seed: int = 0) -> dict:
    """Percentile bootstrap interval of ``metric`` over test examples.

    Args:
        y_true: (N,) gold label ids.
        y_pred: (N,) predictions, or (S, N) for S seeds (the metric is averaged over seeds
            within each resample).
        metric: ``metric(y_true, y_pred) -> float``, e.g. :func:`accuracy`, :func:`macro_f1`.
        n_boot: resamples (1,000 gives the 2.5/97.5 percentiles to about ±0.3 points here).
        level: interval coverage, e.g. 0.95.
        seed: of the resampling RNG (the same seed gives the same interval).

    Returns:
        ``{"value", "low", "high", "level", "n_boot"}``; ``value`` is the metric on the
        full test set (mean over seeds).

    Raises:
        DataError: lengths disagree or no examples.
    """
    return _bootstrap(y_true, [y_pred], lambda m: m[0], metric, n_boot, level, seed)


def bootstrap_diff(y_true, y_pred_a, y_pred_b, metric: Metric = accuracy, n_boot: int = 1000,
                   level: float = 0.95, seed: int = 0) -> dict:
    """Paired bootstrap interval of ``metric(A) - metric(B)``, both scored on the same resamples.

    ``y_pred_a``/``y_pred_b``: (N,) or (S, N) each (seed counts may differ). An interval
    that excludes 0 says the difference is larger than the test set's sampling noise.
    Returns ``{"value", "low", "high", "level", "n_boot"}``.
    """
    return _bootstrap(y_true, [y_pred_a, y_pred_b], lambda m: m[0] - m[1], metric, n_boot, level, seed)


def bootstrap_diff_seeds(y_true, y_pred_a, y_pred_b, metric: Metric = accuracy, n_boot: int = 1000,
                         level: float = 0.95, seed: int = 0) -> dict:
    """Two-level bootstrap of ``metric(A) - metric(B)``: seeds AND test examples resampled.

    ``y_pred_a``/``y_pred_b``: (S, N) each, row ``s`` of both from the same seed (same head
    initialisation and data order), so seeds are resampled in pairs. :func:`bootstrap_diff` keeps the
    seeds fixed and so covers only the test set's sampling noise; this interval also covers how much
    the difference moves from one seed to the next (with 3 seeds the seed level is coarse: read it as
    a floor on the uncertainty, not a precise interval). Returns ``{"value", "low", "high", "level",
    "n_boot", "per_seed"}``, ``per_seed`` the (S,) differences on the full test set.

    Raises:
        DataError: shapes disagree, fewer than 2 seeds, or no examples.
    """
    import numpy as np

    true = np.asarray(y_true)
    a, b = _as_runs(y_pred_a), _as_runs(y_pred_b)
    _check(true, a)
    _check(true, b)
    if a.shape[0] != b.shape[0] or a.shape[0] < 2:
        raise DataError(f"need the same number (>= 2) of seeds on both sides, paired by seed; got {a.shape[0]} "
                        f"and {b.shape[0]}")
    rng = np.random.default_rng(seed)
    n, s = len(true), a.shape[0]
    per_seed = [metric(true, a[i]) - metric(true, b[i]) for i in range(s)]
    samples = []
    for _ in range(n_boot):
        seeds, idx = rng.integers(0, s, s), rng.integers(0, n, n)
        samples.append(float(np.mean([metric(true[idx], a[i][idx]) - metric(true[idx], b[i][idx]) for i in seeds])))
    alpha = (1 - level) / 2
    low, high = np.quantile(samples, [alpha, 1 - alpha])
    return {"value": float(np.mean(per_seed)), "low": float(low), "high": float(high), "level": level,
            "n_boot": n_boot, "per_seed": [float(x) for x in per_seed]}


def _bootstrap(y_true, preds, combine, metric, n_boot, level, seed) -> dict:
    import numpy as np

    true = np.asarray(y_true)
    runs = [_as_runs(p) for p in preds]
    for r in runs:
        _check(true, r)

    def stat(idx) -> float:
        # each system's metric on this resample, averaged over its seeds
        return combine([float(np.mean([metric(true[idx], row[idx]) for row in r])) for r in runs])

    rng = np.random.default_rng(seed)
    full = stat(np.arange(len(true)))
    samples = [stat(rng.integers(0, len(true), len(true))) for _ in range(n_boot)]
    alpha = (1 - level) / 2
    low, high = np.quantile(samples, [alpha, 1 - alpha])
    return {"value": full, "low": float(low), "high": float(high), "level": level, "n_boot": n_boot}
