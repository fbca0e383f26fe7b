"""The artifacts one notebook step hands to the next: where each step finds the previous one's output.

Notebooks 01-03, the recipes and the ``nbkit.jobs`` scripts call these so that all follow
the same data flow: corpus -> tokenizer -> MLM blocks -> pretraining ->
checkpoint -> fine-tuning -> evaluation, with artifacts under
``runs/<scale>/`` (see :mod:`nbkit.runs`): notebook 01's tokenizer (trained here
when missing), notebook 02's model, the steps an epoch count means, ``metrics.json``.
Classifying texts with the fine-tuned model is :mod:`nbkit.evaluate.inference`.
"""
from __future__ import annotations

import math
from pathlib import Path

from nbkit import runs
from nbkit.recipes.scale import Scale


def tokenizer_dir(scale: Scale) -> Path:
    """``runs/<scale>/tokenizer``: where notebook 01 saves the tokenizer."""
    return runs.step_dir(scale.name, "tokenizer")


def tokenizer_texts(scale: Scale) -> tuple[list[str], list[str]]:
    """``(train_texts, heldout_texts)`` for the tokenizer: People's Daily (95/5 split by line) plus
    the training-split reviews (never validation/test), the text the model later reads."""
    from nbkit.data import corpora as data

    splits = data.split_corpus(data.load_peoples_daily(max_lines=scale.corpus_lines),
                               eval_fraction=0.05, seed=scale.seed)
    reviews = data.load_sentiment(seed=scale.seed).splits["train"]["text"]   # all of them, as notebook 01
    return list(splits["train"]["text"]) + list(reviews), list(splits["validation"]["text"])


def train_tokenizer(scale: Scale):
    """Train the scale's WordPiece tokenizer as notebook 01 does, save it and its ``stats.json``.

    Trained on :func:`tokenizer_texts` (news + training reviews, full alphabet); the
    statistics are on held-out news lines. Returns ``(tokenizer, stats)``.
    """

    train_texts, heldout = tokenizer_texts(scale)
    return train_tokenizer_on(train_texts, heldout, scale, tokenizer_dir(scale))


def load_tokenizer(scale: Scale):
    """Load notebook 01's tokenizer for this scale; train it first (and say so) if missing.

    Returns a ``transformers.PreTrainedTokenizerFast``.
    """
    from transformers import AutoTokenizer

    path = tokenizer_dir(scale)
    if not (path / "tokenizer.json").exists():
        print(f"No tokenizer in {path} (notebook 01 not run at scale {scale.name!r}): training one now.")
        tok, _ = train_tokenizer(scale)
        return tok
    return AutoTokenizer.from_pretrained(path)


def pretrained_model_dir(scale: Scale) -> Path | None:
    """``runs/<scale>/mlm/model`` (:func:`nbkit.runs.pretrain_dir`: notebook 02 at the scale's
    recipe on the bundled text) if notebook 02 saved a model there, else None."""
    path = runs.pretrain_dir(scale.name) / "model"
    return path if (path / "config.json").exists() else None


def steps_for_epochs(n_examples: int, batch_size: int, epochs: float) -> int:
    """Optimizer steps for ``epochs`` passes over ``n_examples`` (at least 1).

    Raises:
        ValueError: ``n_examples`` or ``batch_size`` is not positive.
    """
    if n_examples <= 0 or batch_size <= 0:
        raise ValueError(f"need n_examples > 0 and batch_size > 0, got {n_examples} and {batch_size}")
    return max(1, math.ceil(n_examples * epochs / batch_size))


def train_tokenizer_on(texts, heldout_texts, scale: Scale, out_dir, vocab_size: int | None = None):
    """Train the scale's WordPiece tokenizer on ``texts``; measure it on ``heldout_texts``.

    The position limit (``model_max_length``) is that of the scale's model preset
    (:func:`nbkit.models.build_config`), the alphabet is kept whole (see
    :mod:`nbkit.text.tokenizer` for why). Writes the tokenizer and ``stats.json``
    to ``out_dir``.

    Args:
        texts: training text, any iterable of str (e.g. ``splits["train"]["text"]``).
        heldout_texts: text the tokenizer never saw (the labelled validation split):
            the ``[UNK]`` rate there is what fine-tuning will meet.
        scale: the :class:`~nbkit.recipes.scale.Scale` (``vocab_size``, ``model``).
        out_dir: tokenizer directory.
        vocab_size: target vocabulary size; ``None`` uses ``scale.vocab_size``. A
            small corpus gives fewer tokens than asked (every character is kept,
            merges need 2 occurrences).

    Returns:
        ``(tokenizer, stats)`` as :func:`nbkit.text.train_wordpiece` and
        :func:`nbkit.text.tokenizer_stats` give them.
    """
    from nbkit.models.bert import build_config
    from nbkit.text import tokenizer as tokenization

    max_positions = build_config(scale.model, vocab_size=scale.vocab_size).max_position_embeddings
    tok = tokenization.train_wordpiece(texts, vocab_size=vocab_size or scale.vocab_size, out_dir=out_dir,
                                       model_max_length=max_positions)
    stats = tokenization.tokenizer_stats(tok, heldout_texts)
    tokenization.save_stats(stats, out_dir)
    return tok, stats
