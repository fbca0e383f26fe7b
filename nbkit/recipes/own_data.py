"""Notebook 05's glue: the whole pipeline on the user's own files, and the exported model.

The same steps as notebooks 01-03, with the user's labelled file(s) and an
optional unlabelled corpus instead of the bundled corpora:

- the text for the tokenizer and MLM pretraining: with a corpus file, :func:`own_corpus_store`
  (the corpus + the training texts prepared into a token store, validation/test texts excluded);
  without one, the one builder :func:`nbkit.recipes.pretrain_corpus.pretraining_corpus` (``reviews``);
- :func:`train_tokenizer_on`: WordPiece on that text, coverage measured on the
  labelled validation split;
- :func:`export_classifier`: one directory (model + tokenizer + label names)
  that plain ``transformers`` loads without nbkit.
"""
from __future__ import annotations

from pathlib import Path

from nbkit import jsonio
from nbkit.recipes.scale import Scale


def pretraining_texts(labeled, corpus=None, eval_fraction: float = 0.05, seed: int = 0):
    """Notebook 05's pretraining text held in memory: the labelled training texts plus ``corpus``.

    ``corpus`` is a ``datasets.Dataset`` with a ``text`` column, a list of str, or None (the labelled
    training texts alone). Both go through the one builder
    :func:`nbkit.recipes.pretrain_corpus.pretraining_corpus` with the mix ``reviews`` (+ ``own``):
    validation/test texts are excluded, duplicates dropped, and rows over 2,000 characters cut at
    sentence ends before the split, so a one-line corpus never lands whole in validation. For a corpus
    that does not fit in memory use :func:`own_corpus_store` (a streamed token store).

    Returns ``(splits, report)``: a ``DatasetDict(train, validation)`` and the per-source report
    (rows, characters, ``n_rows_cut``, ``largest_row_share``). Raises ``DataError`` when too few texts
    remain for a validation split. Cost: the texts are held in memory (about 3 B of Python string
    per character of Chinese text, plus the dedup keys).
    """
    from nbkit.recipes.pretrain_corpus import pretraining_corpus

    mix = (("reviews", 1.0),) + ((("own", 1.0),) if corpus is not None else ())
    splits, mixed = pretraining_corpus(mix, labeled=labeled, texts=corpus, seed=seed,
                                       eval_fraction=eval_fraction, words=False)
    return splits, mixed.report


def own_corpus_store(corpus_file, labeled, out_dir, scale: Scale, text_column: str = "text",
                     heldout_share: float = 0.05, **settings) -> Path:
    """Notebook 05's unlabelled corpus prepared into a token store (:func:`nbkit.corpus.prepare_corpus`).

    Inputs: ``corpus_file`` (any format the writer reads: ``.txt``, ``.jsonl``, ``.json``, ``.parquet``,
    optionally compressed, a folder or glob) and the labelled *training* texts, written beside the
    store as ``labeled_train.jsonl`` (domain-adaptive pretraining on the texts the classifier learns
    from; rewritten only when they change, so an unchanged run reuses the store). The labelled
    validation and test texts are the writer's ``exclude_texts``: pretraining never reads what the
    classifier is evaluated on. The tokenizer is trained by the writer (``scale.vocab_size``, the
    position limit of ``scale.model``) and serves pretraining and fine-tuning alike.

    Args:
        corpus_file: the user's corpus path(s); labeled: :class:`nbkit.data.LabeledData`;
        out_dir: the store's directory (``out_dir.parent`` gets the training-text file);
        scale: the :class:`~nbkit.recipes.scale.Scale`; text_column: the JSON key / parquet column;
        heldout_share: texts (by hash) in the store's validation split, for the MLM eval loss (0-1);
        settings: more ``prepare_corpus`` settings (``num_workers=``, ``progress=`` ...).

    Returns:
        The store's directory. A finished store of the same inputs and settings is reused; one of
        other inputs or settings (a new split, another file) is prepared again in its place.

    Raises:
        ConfigError / DataError: what ``prepare_corpus`` raises (an unreadable format, no text kept).
    """
    from nbkit.corpus import prepare_corpus
    from nbkit.models.bert import build_config

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    train_file = out.parent / "labeled_train.jsonl"
    lines = "".join(jsonio.dumps({text_column: t}) + "\n" for t in labeled.splits["train"]["text"])
    if not train_file.is_file() or train_file.read_text(encoding="utf-8") != lines:
        from nbkit.atomic import atomic_file

        with atomic_file(train_file, what="labelled training texts") as tmp:
            tmp.write_text(lines, encoding="utf-8")
    evaluation = list(labeled.splits["validation"]["text"]) + list(labeled.splits["test"]["text"])
    max_positions = build_config(scale.model, vocab_size=scale.vocab_size).max_position_embeddings
    inputs = [str(p) for p in (corpus_file if isinstance(corpus_file, (list, tuple)) else [corpus_file])]
    prepare_corpus(inputs + [str(train_file)], out, text_field=text_column, vocab_size=scale.vocab_size,
                   model_max_length=max_positions, heldout_share=heldout_share, exclude_texts=evaluation,
                   overwrite=True, **settings)
    return out
