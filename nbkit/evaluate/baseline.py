"""A TF-IDF character 1-3-gram + logistic-regression baseline: no word segmentation needed, and the bar
a fine-tuned BERT has to clear (it also exposes a leaky split).
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
    """A fitted ``TfidfVectorizer(analyzer="char", ngram_range, min_df) -> LogisticRegression(C)`` pipeline
    on ``N`` texts and label ids. ``class_weight="balanced"`` (n/(K·n_c)) matches
    ``TrainConfig(class_weights="balanced")``.

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
    """:func:`fit_tfidf_baseline` (``**kwargs``) on the training texts; the ``(M,)`` predicted ids of ``eval_texts``.

    Raises:
        DataError: no evaluation texts (checked before fitting), or :func:`fit_tfidf_baseline`'s errors.
    """
    eval_texts = list(eval_texts)
    if not eval_texts:
        raise DataError("The baseline got no evaluation texts; pass a non-empty validation/test split "
                        "(check LabeledData.report['n_val'] / ['n_test'], e.g. val_fraction=0 leaves "
                        "validation empty).")
    return fit_tfidf_baseline(train_texts, train_labels, **kwargs).predict(eval_texts)


def _cut(tokenizer, texts: Sequence[str], max_length: int) -> tuple[list[str], int]:
    """``(texts, n_cut)``: each text cut after its first ``max_length - 2`` tokens, in one tokenizer pass."""
    texts = list(texts)
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    cut = [t if len(off) <= max_length - 2 else t[:off[max_length - 3][1]]
           for t, off in zip(texts, enc["offset_mapping"])]
    return cut, sum(len(off) + 2 > max_length for off in enc["offset_mapping"])


def baseline_at_cut(labeled: "LabeledData", tokenizer, max_length: int,
                    splits: Sequence[str] = ("validation", "test"), class_weight: str | None = None) -> dict:
    """The baseline trained and scored on text cut at ``max_length`` tokens (specials included), as the
    model sees it: ``{"<split>_accuracy", "<split>_macro_f1", "<split>_report", "truncated_fraction":
    {split: 0-1}}`` for ``splits`` (fractions for train too)."""
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
