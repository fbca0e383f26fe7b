"""Seeds and bootstrap intervals for model comparisons."""
import numpy as np
import pytest

from nbkit.errors import DataError
from nbkit.evaluate.stats import accuracy, bootstrap_diff, macro_f1


def test_diff_is_paired_and_sees_a_real_gap():
    rng = np.random.default_rng(1)
    true = rng.integers(0, 2, 2000)
    good = np.where(rng.random(2000) < 0.85, true, 1 - true)
    bad = np.where(rng.random(2000) < 0.75, true, 1 - true)
    d = bootstrap_diff(true, good, bad)
    assert d["value"] == pytest.approx(accuracy(true, good) - accuracy(true, bad))
    assert d["low"] > 0                                      # 10 points on 2,000 examples: clearly real
    same = bootstrap_diff(true, good, good)
    assert same["low"] == same["high"] == 0.0                # paired: identical systems never differ


def test_several_seeds_average_inside_each_resample():
    true = np.array([0, 1, 0, 1])
    runs = np.array([[0, 1, 0, 1], [1, 1, 0, 1]])                # 1.0 and 0.75
    assert bootstrap_diff(true, runs, true, n_boot=50)["value"] == pytest.approx(0.875 - 1.0)
    f1 = bootstrap_diff(true, runs, true, metric=macro_f1, n_boot=50)["value"]
    assert f1 == pytest.approx((1.0 + 0.733333) / 2 - 1.0, abs=1e-4)


def test_length_mismatch_is_a_data_error():
    with pytest.raises(DataError, match="one prediction per test example"):
        bootstrap_diff([0, 1, 1], [0, 1], [0, 1, 1])


def test_seed_resampled_interval_is_wider_when_seeds_disagree():
    import numpy as np

    from nbkit.evaluate.stats import bootstrap_diff, bootstrap_diff_seeds

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    base = np.stack([np.where(rng.random(400) < 0.7, y, 1 - y) for _ in range(3)])   # (3, 400), ~70 % right
    # arm A: one seed much better, two seeds about as good as the base
    a = base.copy()
    a[0] = np.where(rng.random(400) < 0.95, y, 1 - y)
    fixed = bootstrap_diff(y, a, base, n_boot=300)
    seeds = bootstrap_diff_seeds(y, a, base, n_boot=300)
    assert seeds["value"] == pytest.approx(fixed["value"])
    assert len(seeds["per_seed"]) == 3 and seeds["per_seed"][1] == 0 and seeds["per_seed"][0] > 0.15
    assert seeds["low"] < fixed["low"] and seeds["high"] - seeds["low"] > 2 * (fixed["high"] - fixed["low"])
    with pytest.raises(DataError, match="same number"):
        bootstrap_diff_seeds(y, a[:2], base)
    with pytest.raises(DataError, match="same number"):
        bootstrap_diff_seeds(y, a[:1], base[:1])


def test_one_macro_f1_for_the_report_the_bootstrap_and_the_loop():
    import torch
    from sklearn.metrics import f1_score

    from nbkit.evaluate.metrics import classification_report
    from nbkit.evaluate.metrics import macro_f1 as from_confusion

    rng = np.random.default_rng(7)
    true = rng.choice([0, 1, 3], size=200, p=[0.7, 0.25, 0.05])          # class 2 occurs nowhere
    pred = np.where(rng.random(200) < 0.6, true, rng.choice([0, 1, 3], size=200))
    report = classification_report(true, pred, {0: "a", 1: "b", 2: "c", 3: "d"})
    cm = torch.zeros(4, 4)
    cm.index_put_((torch.as_tensor(true), torch.as_tensor(pred)), torch.ones(200), accumulate=True)
    expected = f1_score(true, pred, labels=[0, 1, 3], average="macro")
    assert macro_f1(true, pred) == pytest.approx(expected)
    assert report["macro_f1"] == pytest.approx(expected) and from_confusion(cm) == pytest.approx(expected)
    assert macro_f1(true.tolist(), pred.tolist()) == pytest.approx(expected)
