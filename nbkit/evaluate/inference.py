"""Classify texts with a fine-tuned model: length-sorted batches, answers in input order, ``[UNK]`` share.

What notebook 03 (and 05) show after training and :func:`nbkit.recipes.finetuning.evaluate` scores
the test split with; texts the tokenizer cannot read are refused (``DataError``), not guessed.
"""
from __future__ import annotations


def predict(model, tokenizer, texts, max_length: int, batch_size: int = 64, id2label=None) -> dict:
    """Classify ``texts`` with a sequence-classification model.

    Args:
        model: a ``transformers`` sequence-classification model (its
            ``config.max_position_embeddings`` bounds ``max_length``).
        tokenizer: the model's tokenizer.
        texts: the texts to classify, any iterable of str. A single ``str`` is
            one text (not an iterable of characters): ``predict(m, t, "质量很好", ...)``
            returns one label.
        max_length: tokens per text, ``[CLS]`` and ``[SEP]`` included; longer
            texts are truncated.
        batch_size: texts per forward pass.
        id2label: label id -> name; adds ``table``.

    Returns ``{"label": list[int], "prob": list[float] (probability of the
    predicted class), "unk_share": list[float], "table": pandas.DataFrame}``
    (``table`` only with ``id2label``), one entry per text in input order;
    ``unk_share`` is the fraction of the text's tokens that are ``[UNK]`` (0-1):
    a prediction for a text the tokenizer could not read is a guess. Runs in eval mode under
    ``torch.inference_mode`` on the model's device. Batches are formed in
    order of text length (results come back in input order), so each batch
    pads to a similar length.

    Raises:
        ConfigError: ``max_length`` above the model's ``max_position_embeddings``
            or the tokenizer's ``model_max_length``, or below 3
            (:func:`nbkit.text.mlm.check_length`).
        DataError: texts that give no token (empty, whitespace only, U+3000
            ideographic spaces, zero-width or control characters): the model would
            still give them a confident label. The message names their 0-based indices and a
            filter that removes them (:func:`nbkit.data.textrule.check_text`, the loaders' rule).
            Lone surrogates are replaced by U+FFFD first, as the loaders do.
    """
    import torch

    from nbkit.data.textrule import repair_surrogates
    from nbkit.switches import model_mode
    from nbkit.text.mlm import check_length

    check_length("max_length", max_length, tokenizer,
                 getattr(getattr(model, "config", None), "max_position_embeddings", None))
    texts = [texts] if isinstance(texts, str) else list(texts)
    texts = [repair_surrogates(t)[0] if isinstance(t, str) else t for t in texts]  # the loaders' text rule
    unk_share = _unk_shares(tokenizer, texts)                        # DataError for texts with no token
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    labels, probs = [0] * len(texts), [0.0] * len(texts)
    with torch.inference_mode(), model_mode(model, training=False):  # restored on errors too
        for i in range(0, len(texts), batch_size):
            rows = order[i:i + batch_size]
            enc = tokenizer([texts[j] for j in rows], truncation=True, max_length=max_length,
                            padding=True, return_tensors="pt").to(device)
            p = model(**enc).logits.float().softmax(-1)      # (B, num_labels)
            conf, idx = p.max(-1)
            for j, label, prob in zip(rows, idx.tolist(), conf.tolist()):
                labels[j], probs[j] = label, prob
    out = {"label": labels, "prob": probs, "unk_share": unk_share}
    if id2label is not None:
        import pandas as pd

        out["table"] = pd.DataFrame({"review": texts, "prediction": [id2label[i] for i in labels],
                                     "confidence": [round(p, 3) for p in probs],
                                     "unk_share": [round(u, 3) for u in unk_share]})
    return out


def _unk_shares(tokenizer, texts: list) -> list[float]:
    """Share of ``[UNK]`` among each text's tokens; ``DataError`` naming the texts with no token."""
    from nbkit.errors import DataError

    bad_type = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad_type:
        raise DataError(f"predict expects strings; texts at indices {bad_type[:10]} are "
                        f"{type(texts[bad_type[0]]).__name__}; pass a list of str")
    from nbkit.data.textrule import is_blank

    ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"] if texts else []
    empty = [i for i, row in enumerate(ids) if not row]
    if empty:
        shown = ", ".join(f"{i}: {texts[i]!r}" for i in empty[:10]) + (" ..." if len(empty) > 10 else "")
        fix = ("from nbkit.data.textrule import check_text; texts = [t for t in texts if check_text(t) is not None]"
               if all(is_blank(texts[i]) for i in empty) else  # nbkit's loaders drop exactly these
               "texts = [t for t in texts if tokenizer(t, add_special_tokens=False)['input_ids']]")
        raise DataError(f"{len(empty)} of {len(texts)} texts give no token (empty, whitespace incl. U+3000, zero-width "
                        f"or other invisible characters, or only characters the tokenizer drops), so any label for "
                        f"them is a guess; at 0-based indices {shown}. Drop them first: {fix}")
    unk = tokenizer.unk_token_id
    return [sum(1 for t in row if t == unk) / len(row) for row in ids]
