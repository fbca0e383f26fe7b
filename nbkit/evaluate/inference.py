"""Predict with a fine-tuned model: a label per text (refusing texts the tokenizer cannot read), a tag per token."""
from __future__ import annotations


def predict(model, tokenizer, texts, max_length: int, batch_size: int = 64, id2label=None) -> dict:
    """Classify ``texts`` (a list, or one ``str``) with a sequence-classification model, in eval mode under
    ``torch.inference_mode`` on its device, in batches of similar length.

    Args:
        max_length: tokens per text, ``[CLS]``/``[SEP]`` included; longer texts are truncated.
        batch_size: texts per forward pass.
        id2label: id -> name; adds ``table``.

    Returns ``{"label": [int], "prob": [float] (of the predicted class, 0-1), "unk_share": [float]
    (0-1 of the text's tokens that are ``[UNK]``), "table": pandas.DataFrame}``, in input order.

    Raises:
        ConfigError: ``max_length`` above a limit or below 3 (:func:`nbkit.text.mlm.check_length`).
        DataError: a non-string, or texts that give no token (blank, U+3000, zero-width): any label
            would be a guess; their indices and a filter are named. Lone surrogates become U+FFFD first.
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
    """Share (0-1) of ``[UNK]`` among each text's tokens; DataError naming texts with no token."""
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


def predict_tags(model, tokenizer, items, id2label: dict, max_length: int, stride: int | None = None,
                 batch_size: int = 64) -> tuple[list[list[str]], dict]:
    """Tag every token of ``items`` (dicts with ``tokens``, e.g. one character each) with a token-classification
    model (``logits`` (B, T, C)), in eval mode under ``torch.inference_mode`` on its device.

    Sentences longer than ``max_length`` sub-tokens are windowed with ``stride`` and merged per token
    (:func:`nbkit.text.token_classification.merge_window_predictions`): nothing is cut, every token gets a tag.
    Returns ``(tags, report)``: one list of label names per item, and the encoding's counts (``n_windows``,
    ``n_windowed``, ...: :func:`nbkit.text.token_classification.encode_token_classification`).

    Raises:
        ConfigError / DataError: from the encoding (a bad ``max_length`` or ``stride``, an empty item).
    """
    import torch

    from nbkit.switches import model_mode
    from nbkit.text.token_classification import encode_token_classification, merge_window_predictions

    id2label = {int(k): str(v) for k, v in id2label.items()}
    items = [{"tokens": it["tokens"]} for it in items]          # tags, if any, play no part in prediction
    enc = encode_token_classification(items, tokenizer, {v: k for k, v in id2label.items()}, max_length, stride)
    rows = enc.dataset["input_ids"]
    device = next(model.parameters()).device
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # similar lengths: less padding
    preds: list = [None] * len(rows)
    pad = tokenizer.pad_token_id or 0
    with torch.inference_mode(), model_mode(model, training=False):
        for i in range(0, len(rows), batch_size):
            chunk = order[i:i + batch_size]
            width = max(len(rows[j]) for j in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)             # (B, T)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)                # (B, T)
            for r, j in enumerate(chunk):
                ids[r, :len(rows[j])] = torch.tensor(rows[j])
                mask[r, :len(rows[j])] = 1
            best = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.argmax(-1)  # (B, T)
            for r, j in enumerate(chunk):
                preds[j] = best[r, :len(rows[j])].tolist()
    return merge_window_predictions(enc, preds, id2label), enc.report
