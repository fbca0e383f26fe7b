"""Metrics, confusion-matrix plot, report tables and the TF-IDF baseline."""
from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nbkit.errors import DataError  # noqa: E402
from nbkit.evaluate.baseline import fit_tfidf_baseline, tfidf_baseline  # noqa: E402
from nbkit.evaluate.metrics import classification_report, compare_reports, format_report  # noqa: E402
from nbkit.views.plots import plot_confusion_matrix  # noqa: E402

ID2LABEL = {0: "negative", 1: "positive", 2: "neutral"}


def test_report_matches_hand_computed_values():
    y_true = [0, 0, 0, 1, 1, 2]
    y_pred = [0, 0, 1, 1, 0, 0]
    r = classification_report(y_true, y_pred, ID2LABEL)
    assert r["n"] == 6 and r["accuracy"] == pytest.approx(3 / 6)
    neg = r["per_class"]["negative"]  # tp 2, fp 2 (a 1 and a 2 predicted 0), fn 1
    assert neg["precision"] == pytest.approx(2 / 4) and neg["recall"] == pytest.approx(2 / 3)
    assert neg["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3)) and neg["support"] == 3
    pos = r["per_class"]["positive"]  # tp 1, fp 1, fn 1
    assert pos["f1"] == pytest.approx(0.5)
    assert r["per_class"]["neutral"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert r["macro_f1"] == pytest.approx((neg["f1"] + 0.5 + 0.0) / 3)
    assert r["confusion_matrix"] == [[2, 1, 0], [1, 1, 0], [1, 0, 0]]
    assert r["labels"] == ["negative", "positive", "neutral"]
    json.dumps(r)  # plain Python types, ready for metrics.json


def test_report_accepts_arrays_and_keeps_absent_classes():
    r = classification_report(np.array([1, 1]), np.array([1, 1]), ID2LABEL)
    assert r["accuracy"] == 1.0
    assert r["per_class"]["negative"]["support"] == 0
    assert len(r["confusion_matrix"]) == 3


@pytest.mark.parametrize("y_true, y_pred, match", [
    ([0, 1], [0], "one prediction per example"),
    ([], [], "No examples"),
    ([0, 5], [0, 1], r"\[5\] are not in id2label"),
    ([[0, 1]], [[0, 1]], r"argmax\(-1\)"),
])
def test_report_errors(y_true, y_pred, match):
    with pytest.raises(DataError, match=match):
        classification_report(y_true, y_pred, ID2LABEL)


def test_format_and_compare_tables():
    r = classification_report([0, 0, 1, 1], [0, 1, 1, 1], {0: "neg", 1: "pos"})
    df = format_report(r)
    assert list(df.index) == ["neg", "pos", "macro avg"]
    assert df.loc["macro avg", "f1"] == pytest.approx(round(r["macro_f1"], 3))
    assert df.loc["macro avg", "support"] == 4 and df.attrs["accuracy"] == 0.75
    both = compare_reports({"baseline": r, "perfect": classification_report([0, 1], [0, 1], {0: "n", 1: "p"})})
    assert both.loc["perfect", "accuracy"] == 1.0 and both.loc["baseline", "n"] == 4


def test_plot_confusion_matrix_counts_and_row_percent():
    ax = plot_confusion_matrix([[3, 1], [0, 0]], ["neg", "pos"], title="test")
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["3\n75.0%", "1\n25.0%", "0\n0.0%", "0\n0.0%"]  # empty row: 0 %, no NaN
    assert [t.get_text() for t in ax.get_xticklabels()] == ["neg", "pos"]
    with pytest.raises(DataError, match="does not match 3 labels"):
        plot_confusion_matrix([[1, 0], [0, 1]], ["a", "b", "c"])
    import matplotlib.pyplot as plt

    plt.close("all")


def _toy_reviews(n=40, seed=0):
    rng = np.random.default_rng(seed)
    pos, neg = list("好棒赞喜爱"), list("差烂坏慢退")
    texts, labels = [], []
    for i in range(n):
        label = i % 2
        chars = rng.choice(pos if label else neg, size=4).tolist() + rng.choice(list("的了是书货"), size=3).tolist()
        texts.append("".join(chars))
        labels.append(label)
    return texts, labels


def test_tfidf_baseline_learns_character_cues():
    texts, labels = _toy_reviews(60)
    test_texts, test_labels = _toy_reviews(20, seed=1)
    pred = tfidf_baseline(texts, labels, test_texts)
    assert pred.shape == (20,)
    assert (pred == np.array(test_labels)).mean() >= 0.9
    model = fit_tfidf_baseline(texts, labels)
    assert model.predict(["好棒赞的书"])[0] == 1 and model.predict(["差烂坏的货"])[0] == 0


def test_tfidf_baseline_input_errors():
    with pytest.raises(DataError, match="single class"):
        fit_tfidf_baseline(["好", "棒"], [1, 1])
    with pytest.raises(DataError, match="one label per text"):
        fit_tfidf_baseline(["好", "棒"], [1])
    with pytest.raises(DataError, match="no training texts.*n_train"):
        fit_tfidf_baseline([], [])
    texts, labels = _toy_reviews(10)
    with pytest.raises(DataError, match="no evaluation texts.*n_test"):  # not sklearn's raw ValueError
        tfidf_baseline(texts, labels, [])


def test_balanced_baseline_recovers_a_minority_class_the_plain_one_ignores():
    # 95:5 classes whose texts share most characters: the unweighted logistic regression
    # predicts the majority everywhere; class_weight="balanced" (as TrainConfig(class_weights=
    # "balanced") for BERT) trades some accuracy for the minority's recall.
    import random

    from nbkit.evaluate.baseline import tfidf_baseline

    rng = random.Random(0)
    common = "今天天气不错我们去公园散步"

    def text(minority: bool) -> str:
        s = "".join(rng.choice(common) for _ in range(12))
        return s + ("糟" if minority and rng.random() < 0.6 else rng.choice(common))

    train = [(text(i % 20 == 0), int(i % 20 == 0)) for i in range(400)]
    test = [(text(i % 2 == 0), int(i % 2 == 0)) for i in range(200)]
    xs, ys = [t for t, _ in train], [y for _, y in train]
    plain = tfidf_baseline(xs, ys, [t for t, _ in test], C=1.0)
    weighted = tfidf_baseline(xs, ys, [t for t, _ in test], C=1.0, class_weight="balanced")
    minority = [i for i, (_, y) in enumerate(test) if y == 1]
    recall = lambda pred: sum(pred[i] == 1 for i in minority) / len(minority)  # noqa: E731
    assert recall(plain) == 0 and recall(weighted) >= 0.1, (recall(plain), recall(weighted))
