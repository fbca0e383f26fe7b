"""A fine-tuned classifier (per text or per token) or a causal LM exported as one directory plain ``transformers``
loads (``pipeline()``, ``Auto*``)."""
from __future__ import annotations

from pathlib import Path

from nbkit import jsonio
from nbkit.errors import ConfigError


def export_classifier(model, tokenizer, out_dir, id2label: dict | None = None, max_length: int | None = None) -> Path:
    """Save a fine-tuned classifier (``logits`` (B, num_labels)) as one directory plain ``transformers`` loads
    (``pipeline("text-classification", model=out_dir, truncation=True)``, the ``Auto*`` classes); returns it.

    It holds the weights, ``config.json`` (``id2label``/``label2id``, ``classifier_pooling``) and the full tokenizer
    (``model_max_length`` = ``max_length``; None: the tokenizer's, capped at the positions). A mean-pooling
    classifier carries its code (``nbkit/models/pooling.py``, an ``auto_map``): it loads with
    ``trust_remote_code=True`` without nbkit, and is refused without that flag; loading it needs a writable
    ``HF_MODULES_CACHE`` (:func:`nbkit.caches.ensure_writable_caches`). ``id2label`` (None: the model's) with the
    same names in another order reorders the head. The caller's model and tokenizer are not changed.

    Raises:
        ConfigError: ``id2label`` without one name per class, ``max_length`` outside 3..the position limit,
            or ``out_dir`` an existing file.
        WriteError: the disk is full or not writable; nothing partial is left.
        NonFiniteWeightsError: the model holds NaN/infinite weights (nothing written).
    """
    from nbkit.caches import ensure_writable_caches
    from nbkit.models.bert import label_order
    from nbkit.models.pooling import MeanPoolBertConfig, MeanPoolBertForSequenceClassification

    config, max_length = _labelled_config(model, tokenizer, id2label, max_length)
    auto_map = None
    if isinstance(model, MeanPoolBertForSequenceClassification):  # custom code travels with the weights
        ensure_writable_caches()                      # loading it copies the code into HF_MODULES_CACHE
        config.classifier_pooling = "mean"
        config.classifier_max_length = max_length     # its forward cuts longer input as truncation=True does
        config = MeanPoolBertConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
        auto_map = {"AutoConfig": "pooling.MeanPoolBertConfig",
                    "AutoModelForSequenceClassification": "pooling.MeanPoolBertForSequenceClassification"}
    else:
        config.classifier_pooling = getattr(config, "classifier_pooling", None) or "cls"
    return _export(model, tokenizer, out_dir, config, max_length, auto_map=auto_map,
                   head_order=label_order(model.config.id2label, config.id2label))


def export_causal_lm(model, tokenizer, out_dir, *, repetition_penalty: float | None = None,
                     no_repeat_ngram_size: int | None = None) -> Path:
    """Save a causal LM (GPT-2 / Llama) as one directory plain ``transformers`` loads; returns it as a ``Path``.

    The standard class's weights, ``config.json`` and ``generation_config.json`` (``AutoModelForCausalLM`` and
    ``pipeline("text-generation", model=out_dir)`` load it without ``trust_remote_code``; eos = the document
    separator) and the full tokenizer (``model_max_length`` = the positions, Chinese decoded without spaces:
    :func:`nbkit.text.tokenizer_files.cjk_decoder`), whose ``tokenizer(text)`` puts the document separator first
    as training did (:func:`nbkit.text.causal.prompt_ids`), so ``pipeline``'s greedy continuation and
    :func:`nbkit.evaluate.generation.generate`'s agree token for token.

    ``generation_config.json`` is notebook 06's greedy call (:func:`nbkit.models.causal.generation_config`:
    ``max_length`` = the context, the given ``repetition_penalty`` / ``no_repeat_ngram_size``), so a bare pipeline
    call decodes as ``generate`` does rather than by the pipeline's defaults (256 sampled tokens). No
    ``max_new_tokens`` is written: it overrides ``max_length``, and a prompt plus a fixed count past GPT-2's
    positions raises IndexError inside transformers. Written atomically (other files in ``out_dir`` kept).

    Raises:
        ConfigError: ``model`` is not a causal LM (a BERT masked LM: its pretraining folder with
            ``pipeline("fill-mask")``), ``out_dir`` is a file, or a generation setting out of range
            (:func:`~nbkit.models.causal.check_generation_args`).
        NonFiniteWeightsError: the model holds NaN/inf weights (named): nothing is written.
        WriteError: the disk is full or not writable; nothing partial is left.
    """
    import copy

    from nbkit.models.causal import generation_config, is_causal_lm, positions
    from nbkit.text.mlm import document_separator

    if not is_causal_lm(model):
        kind = getattr(getattr(model, "config", None), "model_type", None)
        raise ConfigError(f"export_causal_lm takes a GPT-2 / Llama causal LM, got a {kind!r} model "
                          f"({type(model).__name__}); a BERT masked LM cannot generate text: use its pretraining "
                          "folder with pipeline('fill-mask') (nbkit.evaluate.probes.fill_mask), or export a "
                          "fine-tuned classifier with export_classifier")
    config = copy.deepcopy(model.config)
    config.use_cache = True                              # generation reuses the keys and values
    return _export(model, tokenizer, out_dir, config, min(int(tokenizer.model_max_length), positions(config)),
                   generation=generation_config(model.config, repetition_penalty=repetition_penalty,
                                                no_repeat_ngram_size=no_repeat_ngram_size),  # notebook 06's greedy
                   cjk_decode=True, start_token=document_separator(tokenizer)[1])


def export_token_classifier(model, tokenizer, out_dir, id2label: dict | None = None,
                            max_length: int | None = None, stride: int | None = None) -> Path:
    """Save a token classifier (``BertForTokenClassification``, ``logits`` (B, T, C)) as one directory that
    ``pipeline("token-classification", model=out_dir, aggregation_strategy="first", stride=...)`` loads without
    ``trust_remote_code``; returns it.

    It holds the weights, ``config.json`` (the BIO ``id2label``, so ``entity_group`` is the entity type, and
    ``task_specific_params["token-classification"]``: ``aggregation_strategy`` and ``stride``) and the tokenizer
    with one pre-token per character (:func:`nbkit.text.token_classification.char_tokenizer`, ``model_max_length``
    = ``max_length``), so ``tagger(text)`` tokenizes as training did and answers entities with character offsets.
    ``stride``: tokens two windows share (None: a quarter of ``max_length``); without one transformers cuts a
    longer text at ``max_length`` tokens silently. The caller's model and tokenizer are not changed; atomic.

    Raises:
        ConfigError: not a token classifier, ``id2label`` without one name per class, ``max_length`` outside
            3..the position limit, ``stride`` not in ``0 .. max_length - 3``, a slow tokenizer, or ``out_dir`` an
            existing file.
        NonFiniteWeightsError: the model holds NaN/inf weights (named): nothing is written.
        WriteError: the disk is full or not writable; nothing partial is left.
    """
    from nbkit.text.token_classification import AGGREGATION, char_tokenizer, window_starts

    if not type(model).__name__.endswith("ForTokenClassification"):
        raise ConfigError(f"export_token_classifier takes a token classifier (BertForTokenClassification), got "
                          f"{type(model).__name__}; export a sequence classifier with export_classifier")
    config, max_length = _labelled_config(model, tokenizer, id2label, max_length)
    stride = max_length // 4 if stride is None else int(stride)
    window_starts(0, max_length - 2, stride)                        # ConfigError for a stride the pipeline refuses
    config.task_specific_params = {**(getattr(config, "task_specific_params", None) or {}),
                                   "token-classification": {"aggregation_strategy": AGGREGATION, "stride": stride}}
    return _export(model, char_tokenizer(tokenizer), out_dir, config, max_length)


def _labelled_config(model, tokenizer, id2label: dict | None, max_length: int | None):
    """``(config, max_length)``: a copy of ``model.config`` with ``id2label``/``label2id`` set, and the checked
    ``max_length`` (None: the tokenizer's, capped at the positions). ConfigError: either out of range."""
    import copy

    config = copy.deepcopy(model.config)                 # the caller's config stays as it is
    names = {int(k): str(v) for k, v in (id2label if id2label is not None else config.id2label).items()}
    if sorted(names) != list(range(config.num_labels)):
        raise ConfigError(f"id2label has ids {sorted(names)} but the model has {config.num_labels} classes "
                          f"(ids 0..{config.num_labels - 1}); pass one name per class, e.g. labeled.id2label "
                          "or dict(enumerate(labels))")
    limit = config.max_position_embeddings
    max_length = min(int(tokenizer.model_max_length), limit) if max_length is None else max_length
    if not 3 <= max_length <= limit:
        raise ConfigError(f"max_length={max_length} must be between 3 and the model's position limit {limit}; "
                          "pass the max_length the model was trained with")
    config.id2label, config.label2id = names, {v: k for k, v in names.items()}
    return config, max_length


def _export(model, tokenizer, out_dir, config, max_length: int, *, head_order: list[int] | None = None,
            generation=None, auto_map: dict | None = None, **tokenizer_options) -> Path:
    """Write a shallow clone of ``model`` with ``config`` (and ``generation``) and the tokenizer (``model_max_length``
    = ``max_length``, ``tokenizer_options`` for :func:`nbkit.text.tokenizer_files.save_tokenizer`) atomically into
    ``out_dir``; returns it. ``head_order`` (:func:`nbkit.models.bert.label_order`) permutes a copy of the head;
    ``auto_map`` copies ``nbkit/models/pooling.py`` beside the weights. Raises ConfigError (``out_dir`` a file),
    NonFiniteWeightsError, WriteError, as the exports say."""
    import copy
    import shutil

    from nbkit.atomic import atomic_dir
    from nbkit.models import pooling
    from nbkit.models.bert import check_finite_weights, reorder_head
    from nbkit.models.loading import quiet_transformers
    from nbkit.text.tokenizer_files import save_tokenizer

    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise ConfigError(f"export directory {out} is an existing file; pass a directory path")
    check_finite_weights(model, f"the export to {out}")
    clone = copy.copy(model)                             # shares the weights; save_pretrained edits clone.config
    clone.config = config
    if generation is not None:
        clone.generation_config = generation
    if head_order is not None:                           # same names, other order: reorder a copy of the head
        clone._modules = dict(model._modules)
        clone.classifier = copy.deepcopy(model.classifier)
        reorder_head(clone, head_order)
    with atomic_dir(out, replace=False, what="export") as tmp, quiet_transformers():  # WriteError: disk full
        clone.save_pretrained(tmp)
        saved = jsonio.loads_strict((tmp / "config.json").read_text(encoding="utf-8"))   # ValueError on NaN/Infinity
        if auto_map is not None:                         # the code beside the weights, named in auto_map
            shutil.copyfile(pooling.__file__, tmp / "pooling.py")
            jsonio.write_json(tmp / "config.json", {**saved, "auto_map": auto_map})
        save_tokenizer(tokenizer, tmp, model_max_length=max_length, **tokenizer_options)
    return out
