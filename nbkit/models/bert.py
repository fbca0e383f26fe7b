"""BERT presets and model construction: MLM from config, classifiers (per text or per token) from a checkpoint
or from scratch.

Presets follow the BERT miniatures (Turc et al. 2019; ``tiny`` is narrower still, for CI) and BERT-base
(Devlin et al. 2019), with PyTorch's fused attention (``attn_implementation="sdpa"``). Nothing is
downloaded implicitly: a hub name works only when cached or online.
"""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification

from nbkit.errors import CheckpointError, ConfigError
from nbkit.models.loading import _saved_labels, load_pretrained, saved_config, seeded
from nbkit.models.mlm_head import SparseHeadBertForMaskedLM

#: BertConfig kwargs per preset (``count_parameters`` gives their sizes).
PRESETS: dict[str, dict] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                 max_position_embeddings=128),
    # L=4, H=128 from the BERT miniatures grid (Turc et al. 2019): the cpu scale's model (docs/pretraining.md)
    "narrow": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=2, intermediate_size=512,
                   max_position_embeddings=128),
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                 max_position_embeddings=512),
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048,
                  max_position_embeddings=512),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 max_position_embeddings=512),
}

ATTN_IMPLEMENTATION = "sdpa"


def build_config(preset: str, vocab_size: int, max_position_embeddings: int | None = None, **overrides) -> BertConfig:
    """A ``BertConfig`` for ``preset`` (:data:`PRESETS`) with ``vocab_size`` rows (normally ``len(tokenizer)``),
    ``max_position_embeddings`` positions (None: the preset's) and ``overrides`` (other ``BertConfig`` fields).

    Raises:
        ConfigError: unknown preset (the presets listed), a non-positive size, or ``hidden_size`` not
            divisible by the head count.
    """
    if preset not in PRESETS:
        raise ConfigError(f"unknown model preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if vocab_size <= 0:
        raise ConfigError(f"vocab_size={vocab_size} must be positive; pass len(tokenizer)")
    kwargs = dict(PRESETS[preset])
    if max_position_embeddings is not None:
        if max_position_embeddings <= 2:
            raise ConfigError(f"max_position_embeddings={max_position_embeddings} must exceed 2 ([CLS] and [SEP])")
        kwargs["max_position_embeddings"] = max_position_embeddings
    kwargs.update(overrides)
    if kwargs["hidden_size"] % kwargs["num_attention_heads"]:
        raise ConfigError(f"hidden_size={kwargs['hidden_size']} is not divisible by num_attention_heads="
                          f"{kwargs['num_attention_heads']}; change one of them")
    kwargs.setdefault("attn_implementation", ATTN_IMPLEMENTATION)
    return BertConfig(vocab_size=vocab_size, **kwargs)


def _token_ids(tokenizer) -> dict:
    return dict(pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
                sep_token_id=tokenizer.sep_token_id)


def build_mlm_model(preset: str, tokenizer, block_size: int, seed: int | None = 0, **overrides) -> BertForMaskedLM:
    """A randomly initialised :class:`~nbkit.models.mlm_head.SparseHeadBertForMaskedLM` for ``tokenizer``
    (vocabulary size, pad/cls/sep ids): ``input_ids`` (B, T <= block_size) -> ``logits`` (B, T, V). ``seed``:
    weights drawn under :func:`nbkit.models.loading.seeded`; None draws from the global RNG.

    Raises:
        ConfigError: unknown preset, or ``block_size`` <= 2 or above the position limit (both named).
    """
    config = build_config(preset, len(tokenizer), **{**_token_ids(tokenizer), **overrides})
    limit = config.max_position_embeddings
    if block_size > limit:
        raise ConfigError(f"block_size={block_size} exceeds the {preset!r} model's position limit "
                          f"max_position_embeddings={limit}; use block_size <= {limit} or pass "
                          f"max_position_embeddings={block_size}")
    if block_size <= 2:
        raise ConfigError(f"block_size={block_size} must exceed 2 ([CLS] and [SEP]); use e.g. 128")
    with seeded(seed):
        return SparseHeadBertForMaskedLM(config)


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters (tied weights counted once, as ``model.parameters()`` yields them)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def nonfinite_weights(model: torch.nn.Module) -> list[str]:
    """Names of ``model``'s floating-point ``state_dict`` tensors holding a NaN or an infinity (``[]``: none), with
    one host sync per device."""
    by_device: dict = {}
    for k, v in model.state_dict().items():
        if torch.is_floating_point(v) and v.device.type != "meta":
            by_device.setdefault(v.device, []).append((k, v))
    bad = []
    for named in by_device.values():                 # one sync per device
        flags = torch.stack([torch.isfinite(v).all() for _, v in named]).tolist()
        bad += [k for (k, _), ok in zip(named, flags) if not ok]
    return bad


def check_finite_weights(model: torch.nn.Module, what: str) -> None:
    """Raise ``NonFiniteWeightsError`` before ``what`` (a checkpoint, the trained model, an export) is written
    when ``model`` holds non-finite weights (named): a NaN model must never be saved as one."""
    bad = nonfinite_weights(model)
    if bad:
        from nbkit.errors import NonFiniteWeightsError

        dtype = next((p.dtype for p in model.parameters()), None)
        raise NonFiniteWeightsError(
            f"not saving {what}: {len(bad)} weight tensors hold NaN or infinite values ({', '.join(bad[:4])}"
            f"{' ...' if len(bad) > 4 else ''}; parameters in {str(dtype).removeprefix('torch.')}). The training "
            "diverged: resume from the last checkpoint with a lower lr or precision='bf16'/'fp32', and load "
            "float16 checkpoints as float32 (nbkit's loaders do).")


#: Files ``tokenizer.save_pretrained`` writes that hold the vocabulary.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")


def vocab_difference(saved: dict, given: dict) -> str | None:
    """None when the two vocabularies (token -> id) are equal, else what differs as a phrase (sizes given vs saved,
    how many tokens have other ids, three examples)."""
    if saved == given:
        return None
    wrong = [t for t in sorted(set(saved) | set(given), key=lambda t: saved.get(t, len(saved)))
             if saved.get(t) != given.get(t)]
    examples = ", ".join(f"{t!r}: {saved.get(t)} vs {given.get(t)}" for t in wrong[:3])
    return f"{len(given)} vs {len(saved)} tokens, {len(wrong)} tokens with other ids (saved vs given: {examples})"


def check_tokenizer_matches(tokenizer, vocab_size: int, model_dir: Path | None, name: str) -> None:
    """Raise ``ConfigError`` unless ``tokenizer`` is the model's: the same vocabulary (token -> id) as a
    tokenizer saved in ``model_dir`` (:data:`TOKENIZER_FILES`), else ``len(tokenizer) == vocab_size``
    (embedding rows). Another tokenizer would feed ids meaning other tokens, silently.
    """
    fix = f"use the tokenizer saved with the model: AutoTokenizer.from_pretrained({name!r})"
    if model_dir is not None and any((model_dir / f).is_file() for f in TOKENIZER_FILES):
        from transformers import AutoTokenizer

        differ = vocab_difference(AutoTokenizer.from_pretrained(str(model_dir)).get_vocab(), tokenizer.get_vocab())
        if differ:
            raise ConfigError(f"the tokenizer does not match the one saved with the model in {model_dir}: "
                              f"{differ}; {fix}")
        if len(tokenizer) <= vocab_size:
            return
    if len(tokenizer) != vocab_size:
        raise ConfigError(
            f"tokenizer has {len(tokenizer)} tokens but the model's embedding table has {vocab_size}, "
            f"so it is not the tokenizer the model was trained with; {fix}")


POOLINGS = ("cls", "mean")


def label_order(saved: dict, wanted: dict) -> list[int] | None:
    """Saved ids in the order of ``wanted``'s (both: class id -> name) when they name the same labels in another
    order, else None: ``[2, 1, 0]`` means the head's output 2 is ``wanted``'s class 0."""
    saved = {int(k): str(v) for k, v in saved.items()}
    wanted = {int(k): str(v) for k, v in wanted.items()}
    if saved == wanted or sorted(saved.values()) != sorted(wanted.values()) or len(set(saved.values())) != len(saved):
        return None
    by_name = {v: k for k, v in saved.items()}
    return [by_name[wanted[i]] for i in sorted(wanted)]


def reorder_head(model, order: list[int]) -> None:
    """Permute ``model.classifier`` (``nn.Linear`` (C, d)) in place: new output ``i`` is old output ``order[i]``."""
    import torch

    with torch.no_grad():
        index = torch.tensor(order, device=model.classifier.weight.device)
        model.classifier.weight.copy_(model.classifier.weight[index])        # (C, d)
        model.classifier.bias.copy_(model.classifier.bias[index])            # (C,)


def _saved_pooling(path: Path) -> str | None:
    """The pooling a saved classifier was trained with; None when ``path`` holds no classifier."""
    saved = saved_config(path) or {}                 # a broken file: load_pretrained reports it
    archs = [str(a) for a in saved.get("architectures") or []]
    if not any(a.endswith("ForSequenceClassification") for a in archs):
        return None
    return saved.get("classifier_pooling") or ("mean" if any("MeanPool" in a for a in archs) else "cls")


#: config.json key nbkit's pretraining writes into the models it saves (``{"objective": "mlm", "init": ...}``)
NBKIT_MARK = "nbkit_pretraining"


def choose_pooling(folder: Path | None) -> tuple[str, str]:
    """``(pooling, reason)`` for a classifier whose encoder starts from ``folder`` (None: random weights): a saved
    classifier's own; ``cls`` where a published BERT's sentence objective trained the pooler; else ``mean``."""
    from nbkit.models.loading import weight_names

    if folder is None:
        return "mean", "random weights: no trained pooler to reuse"
    saved = _saved_pooling(folder)
    if saved is not None:
        return saved, "the saved classifier's"
    if (saved_config(folder) or {}).get(NBKIT_MARK):
        return "mean", "pretrained by nbkit's MLM-only recipe: its [CLS] pooler was never trained"
    if any(n.endswith("pooler.dense.weight") for n in weight_names(folder)):
        return "cls", ("the checkpoint carries a trained [CLS] pooler (published BERTs train it with next-sentence "
                       "or sentence-order prediction; their authors' scores use it)")
    return "mean", "the checkpoint has no pooler weights (an MLM-only model): a cls head would read a random pooler"


def classifier_class(pooling: str):
    """``BertForSequenceClassification`` for ``pooling="cls"``,
    :class:`~nbkit.models.pooling.MeanPoolBertForSequenceClassification` for ``"mean"``; ConfigError for another."""
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling={pooling!r}: use one of {', '.join(POOLINGS)}")
    if pooling == "mean":
        from nbkit.models.pooling import MeanPoolBertForSequenceClassification

        return MeanPoolBertForSequenceClassification
    return BertForSequenceClassification


HEADS = ("sequence", "token")


def auto_head_class(model_type: str, head: str, source: str = ""):
    """The class ``AutoModelFor{Sequence,Token}Classification`` (``head`` ``"sequence"`` / ``"token"``) maps
    ``model_type`` to (``electra`` -> ``ElectraForSequenceClassification``), so a ``config.json`` whose type only
    ``architectures`` names still loads. Raises ConfigError: no such head for ``model_type`` (the fix named)."""
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification
    from transformers.models.auto import modeling_auto

    mapping, auto = ((modeling_auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES, AutoModelForTokenClassification)
                     if head == "token" else
                     (modeling_auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES, AutoModelForSequenceClassification))
    if model_type not in mapping:
        task = "token classification (named entities)" if head == "token" else "sequence classification"
        raise ConfigError(f"source={source!r} is a {model_type!r} model, and transformers has no {task} head for the "
                          f"{model_type!r} layout ({auto.__name__} does not map it), so it cannot be fine-tuned for "
                          "this task. Pass an encoder whose layout has one: BERT (bert-base-chinese, RoBERTa-wwm, "
                          "MacBERT), ELECTRA, ERNIE, ALBERT, RoBERTa, ...")
    return getattr(transformers, mapping[model_type])


def build_classifier(source: str | Path | None, num_labels: int, id2label: dict[int, str],
                     tokenizer=None, preset: str | None = None, reinit_head: bool = False, seed: int | None = 0,
                     pooling: str | None = None, head: str = "sequence", **overrides):
    """``(model, how)``: a sequence classifier (``logits`` (B, num_labels)), or with ``head="token"`` a token
    classifier (``logits`` (B, T, num_labels)), and a one-line note saying where it came from.

    ``source``: a ``save_pretrained`` folder or a Hub name (cached or downloadable), or None to build a BERT from
    ``preset`` and ``tokenizer``. A BERT-layout encoder gets ``BertForTokenClassification`` or the pooling
    :func:`choose_pooling` picks (``pooling`` None; ``"cls"`` / ``"mean"``: :func:`classifier_class`); any other
    encoder transformers knows (ELECTRA, ERNIE, ...) its family's own head (:func:`auto_head_class`).
    ``tokenizer`` is checked to be the model's (:func:`check_tokenizer_matches`). ``reinit_head``: a new head where
    the checkpoint's has another label count (``how`` lists the weights) instead of raising; saved label names in
    another order reorder the head to follow ``id2label``. ``seed``: every weight not loaded
    (:func:`nbkit.models.loading.seeded`). ``overrides``: ``BertConfig`` fields when built from scratch.

    Raises:
        ConfigError: ``id2label`` not one name per label; preset/tokenizer missing for ``source=None``;
            a hub name not available (:func:`nbkit.models.loading.resolve_checkpoint`); another tokenizer; a head
            with another label count without ``reinit_head``; a pooling that contradicts the saved one or
            ``"mean"`` for an encoder that is not BERT; a layout without such a head (:func:`auto_head_class`).
        CheckpointError: a directory without ``config.json`` or its weights, a config without a model type,
            unreadable weights, or another load failure (:func:`nbkit.models.loading.load_pretrained`).
    """
    if head not in HEADS:
        raise ConfigError(f"head={head!r}: use one of {', '.join(HEADS)}")
    token = head == "token"
    id2label = {int(k): str(v) for k, v in id2label.items()}
    if len(id2label) != num_labels:
        raise ConfigError(f"id2label has {len(id2label)} entries but num_labels={num_labels}; make them agree")
    label_kwargs = dict(num_labels=num_labels, id2label=id2label, label2id={v: k for k, v in id2label.items()})

    if source is None:
        pooling, why = (pooling, "requested") if pooling else choose_pooling(None)
        if preset is None or tokenizer is None:
            raise ConfigError("build_classifier(source=None) builds from scratch and needs preset=... and tokenizer=...")
        config = build_config(preset, len(tokenizer), **_token_ids(tokenizer), **label_kwargs, **overrides)
        if not token:
            config.classifier_pooling = pooling
        with seeded(seed):
            model = (BertForTokenClassification if token else classifier_class(pooling))(config)
        head = "a token-classification head (" if token else f"{pooling} pooling ({why}; "
        return model, f"from scratch: preset {preset!r}, random init, {head}{count_parameters(model):,} parameters)"

    from nbkit.models.loading import checkpoint_model_type, dtype_note, resolve_checkpoint
    from nbkit.models.pooling import MeanPoolBertConfig

    text = str(source)
    path = resolve_checkpoint(source, what="source", alternative="use source=None with preset='tiny'|'mini'|"
                              "'small'|'base' to train from scratch")
    kind = checkpoint_model_type(path, source, what="source")
    local = Path(text).expanduser().is_dir()
    saved_labels = _saved_labels(path) if not reinit_head else None
    if token and not any(str(a).endswith("ForTokenClassification")
                         for a in (saved_config(path) or {}).get("architectures") or []):
        saved_labels = None
    if kind in ("bert", MeanPoolBertConfig.model_type):   # BERT layout (RoBERTa-wwm, MacBERT): nbkit's pooling choice
        saved_pooling = _saved_pooling(path) if not reinit_head and not token else None
        if pooling and saved_pooling and pooling != saved_pooling:
            raise ConfigError(
                f"{path} is a classifier trained with pooling={saved_pooling!r}, but pooling={pooling!r} was "
                f"requested; omit pooling= (the saved one is used), or pass reinit_head=True to train a new {pooling} "
                "head")
        pooling, why = ((None, "") if token else (pooling, "requested") if pooling else choose_pooling(path))
        model_cls, load_kw = (BertForTokenClassification if token else classifier_class(pooling),
                              {"attn_implementation": ATTN_IMPLEMENTATION})
    else:                                 # ELECTRA, ERNIE, ALBERT, ...: the family's own head, as transformers maps it
        model_cls, load_kw = auto_head_class(kind, head, text), {}
        if pooling not in (None, "cls"):
            raise ConfigError(f"pooling={pooling!r} is nbkit's mean-pooling head for BERT encoders; {text!r} is a "
                              f"{kind!r} encoder, fine-tuned with its own head ({model_cls.__name__}): omit pooling")
        pooling, why = (None, "") if token else ("cls", f"the {kind} family's own head")
    try:
        model, info = load_pretrained(model_cls, str(path), reinit_head=reinit_head, seed=seed, **load_kw,
                                      **label_kwargs)
        if not token:
            model.config.classifier_pooling = pooling
        lost = [k for k in info["missing_keys"] if not k.startswith("classifier") and ".pooler." not in k]
        if kind not in ("bert", MeanPoolBertConfig.model_type) and lost:   # the family's encoder must load whole
            raise CheckpointError(
                f"{text!r} lacks {len(lost)} weights of the {kind!r} encoder {model_cls.__name__} reads "
                f"({', '.join(sorted(lost)[:4])}{' ...' if len(lost) > 4 else ''}), which would start random: its "
                f"weights are of another layout than its config.json's {kind!r}. Fix config.json's model_type / "
                "architectures to the layout the weights were trained as, or pass another checkpoint.")
    except OSError as exc:   # config.json is there (checked): the weights are missing or unreadable
        files = ", ".join(sorted(p.name for p in path.iterdir())[:8])
        raise CheckpointError(
            f"{path} has config.json but its weights could not be read ({type(exc).__name__}: "
            f"{str(exc)[:200]}); it holds: {files}. Re-save the model with save_pretrained, or pass the "
            "complete directory (model.safetensors beside config.json).") from exc

    if tokenizer is not None:
        check_tokenizer_matches(tokenizer, model.config.vocab_size, path, text)
    new = sorted({k.rsplit(".", 1)[0] for k in info["missing_keys"]})
    kind = "local checkpoint" if local else "hub model"
    stored = dtype_note(info.get("stored_dtype"))
    how = (f"loaded encoder from {kind} {str(source)!r}; newly initialised: {', '.join(new) or 'nothing'} "
           + (f"({num_labels} labels per token)" if token else f"({num_labels} labels, {pooling} pooling: {why})")
           + (f"; weights {stored}" if stored else ""))
    order = (label_order(saved_labels, id2label) if saved_labels and "classifier" not in new
             and isinstance(getattr(model, "classifier", None), torch.nn.Linear) else None)
    if order is not None:           # same names, other order: the saved head's rows follow the names
        reorder_head(model, order)
        how += f"; head outputs reordered from the saved label order {[saved_labels[i] for i in sorted(saved_labels)]}"
    if info["reinitialised"]:
        how += f"; re-initialised (reinit_head=True, checkpoint -> model shape): {', '.join(info['reinitialised'])}"
    return model, how
