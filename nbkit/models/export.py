"""A fine-tuned classifier exported as one directory plain ``transformers`` loads (``pipeline()``, ``Auto*``)."""
from __future__ import annotations

from pathlib import Path

from nbkit import jsonio
from nbkit.errors import ConfigError


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

    from nbkit.models.bert import label_order, reorder_head
    from nbkit.models.loading import quiet_transformers
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
