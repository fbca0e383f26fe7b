"""Notebook 05's glue: the whole pipeline on the user's own files, and the exported model.

The same steps as notebooks 01-03, with the user's labelled file(s) and an
optional unlabelled corpus instead of the bundled corpora:

- the text for the tokenizer and MLM pretraining: with a corpus file, :func:`own_corpus_store`
  (the corpus + the training texts prepared into a token store, validation/test texts excluded);
  without one, the one builder :func:`nbkit.pipeline.pretraining_text.pretraining_corpus` (``reviews``);
- :func:`train_tokenizer_on`: WordPiece on that text, coverage measured on the
  labelled validation split;
- :func:`export_classifier`: one directory (model + tokenizer + label names)
  that plain ``transformers`` loads without nbkit.
"""
from __future__ import annotations

from pathlib import Path

from nbkit import jsonio
from nbkit.errors import ConfigError
from nbkit.pipeline.scale import Scale


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
        scale: the :class:`~nbkit.pipeline.scale.Scale` (``vocab_size``, ``model``).
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


def export_classifier(model, tokenizer, out_dir, id2label: dict | None = None, max_length: int | None = None) -> Path:
    """Save a fine-tuned classifier as one directory that plain ``transformers`` loads.

    The directory holds the weights (``model.safetensors``), ``config.json`` with
    ``id2label``/``label2id`` (so predictions come back as label names),
    ``classifier_pooling`` and ``architectures``, and the complete tokenizer file set
    (:mod:`nbkit.text.tokenizer_files`) whose ``model_max_length`` is ``max_length``. It loads with::

        transformers.pipeline("text-classification", model=out_dir, truncation=True)
        AutoModelForSequenceClassification.from_pretrained(out_dir)
        AutoTokenizer.from_pretrained(out_dir)

    and the pipeline gives :func:`nbkit.pipeline.predict`'s labels and scores (within 1e-5)
    on short, long, empty and batched input (``tests/test_export_loaders.py``): with
    ``truncation=True`` it cuts every text at ``max_length`` tokens as ``predict()`` does
    (without it a text longer than the position limit is a tensor-size error). A mean-pooling
    classifier (``build_classifier(..., pooling="mean")``) is not a ``transformers`` class: its
    code (``nbkit/models/pooling.py``, torch and transformers only) is saved beside the weights
    with an ``auto_map``, so the same calls work with ``trust_remote_code=True`` and without nbkit;
    without that flag transformers refuses it (it does not silently pool ``[CLS]``). Loading the
    code needs a writable ``HF_MODULES_CACHE`` (README, "Cache locations").

    The caller's ``model`` and ``tokenizer`` are not changed (the config is saved from a copy).

    Args:
        model: a ``transformers`` sequence-classification model (any device;
            ``logits`` (B, num_labels)).
        tokenizer: its tokenizer.
        out_dir: the export directory (created; files in it are overwritten).
        id2label: class id -> name; ``None`` keeps the names in ``model.config``
            (:func:`nbkit.models.build_classifier` puts them there). The same names in another
            order export a head whose outputs are reordered to match (the model's stays).
        max_length: the length in tokens the model was trained and evaluated with (the
            ``max_length`` given to ``encode_classification``/``predict``); ``None``: the
            tokenizer's ``model_max_length`` capped at the position limit.

    Returns:
        ``out_dir`` as a ``Path``.

    Raises:
        ConfigError: ``id2label`` does not have one name per class (the message
            gives both counts), ``max_length`` outside 3..the position limit, or
            ``out_dir`` is an existing file.
        WriteError: the disk is full or not writable (path, free space, size needed); the files
            are written beside ``out_dir`` first (:func:`nbkit.atomic.atomic_dir`), so nothing partial is left.
    """
    import copy

    from nbkit.models.bert import label_order, quiet_transformers, reorder_head
    from nbkit.models.pooling import MeanPoolBertConfig, MeanPoolBertForSequenceClassification
    from nbkit.text.tokenizer_files import save_tokenizer

    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"export directory {out} is an existing file; pass a directory path")
    config = copy.deepcopy(model.config)                 # the caller's config stays as it is
    names = {int(k): str(v) for k, v in (id2label if id2label is not None else config.id2label).items()}
    if sorted(names) != list(range(config.num_labels)):
        raise ConfigError(f"id2label has ids {sorted(names)} but the model has {config.num_labels} classes "
                          f"(ids 0..{config.num_labels - 1}); pass one name per class, e.g. labeled.id2label")
    limit = config.max_position_embeddings
    if max_length is None:
        max_length = min(int(tokenizer.model_max_length), limit)
    if not 3 <= max_length <= limit:
        raise ConfigError(f"max_length={max_length} must be between 3 and the model's position limit {limit}; "
                          "pass the max_length the classifier was trained with")
    config.id2label = names
    config.label2id = {v: k for k, v in names.items()}
    clone = copy.copy(model)                             # shares the weights; save_pretrained edits clone.config
    order = label_order(model.config.id2label, names)
    if order is not None:                                # same names, other order: reorder a copy of the head
        clone._modules = dict(model._modules)
        clone.classifier = copy.deepcopy(model.classifier)
        reorder_head(clone, order)
    if isinstance(model, MeanPoolBertForSequenceClassification):  # custom code travels with the weights
        config.classifier_pooling = "mean"
        config.classifier_max_length = max_length     # its forward cuts longer input as truncation=True does
        config = MeanPoolBertConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
    else:
        config.classifier_pooling = getattr(config, "classifier_pooling", None) or "cls"
    clone.config = config
    from nbkit.atomic import atomic_dir

    with atomic_dir(out, replace=False, what="export") as tmp, quiet_transformers():  # WriteError: disk full
        clone.save_pretrained(tmp)
        saved = jsonio.loads_strict((tmp / "config.json").read_text(encoding="utf-8"))   # ValueError on NaN/Infinity
        if isinstance(config, MeanPoolBertConfig):       # its code beside the weights, named in auto_map
            import shutil

            from nbkit.models import pooling

            shutil.copyfile(pooling.__file__, tmp / "pooling.py")
            saved["auto_map"] = {"AutoConfig": "pooling.MeanPoolBertConfig",
                                 "AutoModelForSequenceClassification": "pooling.MeanPoolBertForSequenceClassification"}
            jsonio.write_json(tmp / "config.json", saved)
        save_tokenizer(tokenizer, tmp, model_max_length=max_length)
    return out


def pretraining_texts(labeled, corpus=None, eval_fraction: float = 0.05, seed: int = 0):
    """Notebook 05's pretraining text held in memory: the labelled training texts plus ``corpus``.

    ``corpus`` is a ``datasets.Dataset`` with a ``text`` column, a list of str, or None (the labelled
    training texts alone). Both go through the one builder
    :func:`nbkit.pipeline.pretraining_text.pretraining_corpus` with the mix ``reviews`` (+ ``own``):
    validation/test texts are excluded, duplicates dropped, and rows over 2,000 characters cut at
    sentence ends before the split, so a one-line corpus never lands whole in validation. For a corpus
    that does not fit in memory use :func:`own_corpus_store` (a streamed token store).

    Returns ``(splits, report)``: a ``DatasetDict(train, validation)`` and the per-source report
    (rows, characters, ``n_rows_cut``, ``largest_row_share``). Raises ``DataError`` when too few texts
    remain for a validation split. Cost: the texts are held in memory (about 3 B of Python string
    per character of Chinese text, plus the dedup keys).
    """
    from nbkit.pipeline.pretraining_text import pretraining_corpus

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
        scale: the :class:`~nbkit.pipeline.scale.Scale`; text_column: the JSON key / parquet column;
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
