"""Paired bootstrap intervals for comparing two models over test examples (and seeds).

Percentile bootstrap (Efron & Tibshirani 1993, ch. 13): both systems are scored on the same resamples,
which keeps their pairing; several seeds' metrics are averaged inside each resample.
"""
from __future__ import annotations

from collections.abc import Callable

from nbkit.errors import DataError

Metric = Callable[..., float]


def accuracy(y_true, y_pred) -> float:
    """Share of examples with ``y_pred == y_true`` (0-1)."""
    import numpy as np

    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def macro_f1(y_true, y_pred) -> float:
    """Macro-F1 (0-1) of ``(N,)`` class ids over the classes present in either, by
    :func:`nbkit.evaluate.metrics.macro_f1`."""
    import numpy as np

    from nbkit.evaluate.metrics import macro_f1 as from_confusion

    true, pred = np.asarray(y_true).astype(np.int64).ravel(), np.asarray(y_pred).astype(np.int64).ravel()
    ids = np.unique(np.concatenate([true, pred]))                         # (K,) sorted class ids
    k = len(ids)
    cells = np.searchsorted(ids, true) * k + np.searchsorted(ids, pred)   # (N,) row-major cell index
    return from_confusion(np.bincount(cells, minlength=k * k).reshape(k, k))


def _paired(y_true, *y_preds):
    """``y_true`` as an (N,) array and each prediction as an (R, N) array, one row per seed.

    Raises:
        DataError: a prediction that does not cover every example of ``y_true``, or no examples.
    """
    import numpy as np

    true = np.asarray(y_true)
    runs = [np.asarray(p)[None, :] if np.ndim(p) == 1 else np.asarray(p) for p in y_preds]
    for r in runs:
        if r.shape[1] != len(true) or len(true) == 0:
            raise DataError(f"predictions cover {r.shape[1]} examples but y_true has {len(true)}; "
                            "pass one prediction per test example (per seed: shape (seeds, N))")
    return (true, *runs)


def resample_indices(n: int, n_boot: int, seed: int = 0):
    """Yield ``n_boot`` resamples of ``range(n)``: (n,) int arrays drawn with replacement by
    ``numpy.random.default_rng(seed)`` (the same draws for every caller with the same seed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for _ in range(n_boot):
        yield rng.integers(0, n, n)


def percentile_interval(samples, level: float = 0.95) -> tuple[float, float]:
    """``(low, high)``: the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of bootstrap ``samples``."""
    import numpy as np

    alpha = (1 - level) / 2
    low, high = np.quantile(samples, [alpha, 1 - alpha])
    return float(low), float(high)


def bootstrap_diff(y_true, y_pred_a, y_pred_b, metric: Metric = accuracy, n_boot: int = 1000,
                   level: float = 0.95, seed: int = 0) -> dict:
    """Paired bootstrap interval of ``metric(A) - metric(B)`` over ``n_boot`` resamples of the test examples
    (``level`` coverage, ``seed`` of the resampling RNG). ``y_true``: (N,); ``y_pred_a``, ``y_pred_b``: (N,) or
    (S, N) for S seeds (counts may differ). Returns ``{"value" (on the full test set), "low", "high", "level",
    "n_boot"}``.

    Raises:
        DataError: predictions and ``y_true`` differ in length, or no examples.
    """
    import numpy as np

    true, a, b = _paired(y_true, y_pred_a, y_pred_b)

    def diff(idx) -> float:  # each system's metric on this resample, averaged over its seeds
        return (float(np.mean([metric(true[idx], row[idx]) for row in a]))
                - float(np.mean([metric(true[idx], row[idx]) for row in b])))

    full = diff(np.arange(len(true)))
    low, high = percentile_interval([diff(idx) for idx in resample_indices(len(true), n_boot, seed)], level)
    return {"value": full, "low": low, "high": high, "level": level, "n_boot": n_boot}


def bootstrap_diff_seeds(y_true, y_pred_a, y_pred_b, metric: Metric = accuracy, n_boot: int = 1000,
                         level: float = 0.95, seed: int = 0) -> dict:
    """:func:`bootstrap_diff` with seeds resampled in pairs too, so the interval also covers seed-to-seed
    variance (coarse with 3 seeds: a floor on the uncertainty).

    ``y_pred_a``, ``y_pred_b``: (S, N), row s of both from seed s. Returns ``bootstrap_diff``'s keys
    plus ``per_seed``, the (S,) differences on the full test set.

    Raises:
        DataError: shapes disagree, fewer than 2 seeds, or no examples.
    """
    import numpy as np

    true, a, b = _paired(y_true, y_pred_a, y_pred_b)
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
    low, high = percentile_interval(samples, level)
    return {"value": float(np.mean(per_seed)), "low": low, "high": high, "level": level,
            "n_boot": n_boot, "per_seed": [float(x) for x in per_seed]}
