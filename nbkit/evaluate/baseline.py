"""A TF-IDF + logistic-regression baseline for text classification.

Character n-grams (1-3) need no word segmentation, which suits Chinese; a
linear model on them is the bar a fine-tuned BERT has to clear.

Measured (``bench/sentiment_baseline.py``, seed 0): on the deduplicated
80/10/10 split of :func:`nbkit.data.corpora.load_sentiment` it scores 0.845 accuracy /
0.844 macro-F1 on the test split (``shared/design.md`` §3 quotes 0.857 / 0.850
for a differently sized 80/20 split); on a leaky random 80/20 split of the raw
lines (78 % of test texts also in training) it scores 0.958: the baseline is
also a leak detector. ``min_df=2`` and ``C=10`` were picked on the validation
split (C in {1, 4, 10}: 0.858, 0.863, 0.868 validation accuracy).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from nbkit.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from sklearn.pipeline import Pipeline

    from nbkit.data.labeled import LabeledData


def fit_tfidf_baseline(train_texts: Sequence[str], train_labels: Sequence[int], *,
                       ngram_range: tuple[int, int] = (1, 3), min_df: int = 2, C: float = 10.0,
                       max_iter: int = 1000, seed: int = 0, class_weight: str | None = None) -> "Pipeline":
    """Fit ``TfidfVectorizer(analyzer="char", ngram_range) -> LogisticRegression``.

    Args:
        train_texts: ``N`` texts.
        train_labels: ``N`` label ids.
        ngram_range: character n-gram lengths (default 1-3).
        min_df: drop n-grams in fewer documents than this.
        C: inverse L2 regularisation strength of the logistic regression.
        max_iter: solver iterations (lbfgs).
        seed: ``random_state`` of the classifier.
        class_weight: ``None`` or ``"balanced"`` (scikit-learn's n/(K·n_c) loss weights), to compare
            with a BERT fine-tuned with ``TrainConfig(class_weights="balanced")`` on equal terms.

    Returns:
        A fitted scikit-learn ``Pipeline`` (``predict``, ``predict_proba``).

    Raises:
        DataError: lengths differ, no texts, or a single class.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts, labels = list(train_texts), list(train_labels)
    if not texts:
        raise DataError("The baseline got no training texts; pass a non-empty training split "
                        "(check LabeledData.report['n_train'] and the training file).")
    if len(texts) != len(labels):
        raise DataError(f"Got {len(texts)} texts and {len(labels)} labels; pass one label per text.")
    if len(set(labels)) < 2:
        raise DataError(f"Training labels hold a single class {sorted(set(labels))}; a classifier needs two.")
    model = make_pipeline(
        TfidfVectorizer(analyzer="char", ngram_range=ngram_range, min_df=min_df, sublinear_tf=True),
        LogisticRegression(C=C, max_iter=max_iter, random_state=seed, class_weight=class_weight),
    )
    return model.fit(texts, labels)


def tfidf_baseline(train_texts: Sequence[str], train_labels: Sequence[int], eval_texts: Sequence[str],
                   **kwargs) -> "np.ndarray":
    """Fit the baseline on the training texts and predict the evaluation texts.

    Args:
        train_texts, train_labels: as for :func:`fit_tfidf_baseline`.
        eval_texts: ``M`` texts to label.
        **kwargs: passed to :func:`fit_tfidf_baseline`.

    Returns:
        Predicted label ids, shape ``(M,)``.

    Raises:
        DataError: no evaluation texts (checked before fitting), or any
            error of :func:`fit_tfidf_baseline`.
    """
    eval_texts = list(eval_texts)
    if not eval_texts:
        raise DataError("The baseline got no evaluation texts; pass a non-empty validation/test split "
                        "(check LabeledData.report['n_val'] / ['n_test'], e.g. val_fraction=0 leaves "
                        "validation empty).")
    return fit_tfidf_baseline(train_texts, train_labels, **kwargs).predict(eval_texts)


def _cut(tokenizer, texts: Sequence[str], max_length: int) -> tuple[list[str], int]:
    """``(texts cut where the model's tokens end, how many were cut)`` from one tokenizer pass."""
    texts = list(texts)
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    cut = [t if len(off) <= max_length - 2 else t[:off[max_length - 3][1]]
           for t, off in zip(texts, enc["offset_mapping"])]
    return cut, sum(len(off) + 2 > max_length for off in enc["offset_mapping"])


def truncated_fraction(tokenizer, texts: Sequence[str], max_length: int) -> float:
    """Fraction (0-1) of ``texts`` longer than ``max_length`` tokens, ``[CLS]``/``[SEP]`` included."""
    texts = list(texts)
    return _cut(tokenizer, texts, max_length)[1] / max(1, len(texts))


def baseline_at_cut(labeled: "LabeledData", tokenizer, max_length: int,
                    splits: Sequence[str] = ("validation", "test"), class_weight: str | None = None) -> dict:
    """TF-IDF char 1-3-gram + LR (:func:`nbkit.evaluate.baseline.tfidf_baseline`) on text cut at ``max_length`` tokens.

    Trained on the cut training texts, scored on each of ``splits``. Returns
    ``{"<split>_accuracy", "<split>_macro_f1", "<split>_report" (the full classification
    report), "truncated_fraction": {split: 0-1}}`` (train included in the fractions). ``class_weight``:
    ``"balanced"`` weights the logistic regression's loss like ``TrainConfig(class_weights="balanced")``.
    """
    from nbkit.evaluate.baseline import fit_tfidf_baseline
    from nbkit.evaluate.metrics import classification_report

    s = labeled.splits
    cut, n_cut = {}, {}
    for k in ("train", *splits):  # one tokenizer pass per split gives the cut text and the count
        cut[k], n_cut[k] = _cut(tokenizer, s[k]["text"], max_length)
    model = fit_tfidf_baseline(cut["train"], s["train"]["label"], class_weight=class_weight)
    out = {"truncated_fraction": {k: n_cut[k] / max(1, len(cut[k])) for k in cut}}
    for split in splits:
        rep = classification_report(s[split]["label"], model.predict(cut[split]), labeled.id2label)
        out[f"{split}_accuracy"], out[f"{split}_macro_f1"], out[f"{split}_report"] = (
            rep["accuracy"], rep["macro_f1"], rep)
    return out
