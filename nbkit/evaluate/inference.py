"""Predict with a fine-tuned model: a label per text (refusing texts the tokenizer cannot read), a tag per token,
the entities of plain text through an exported tagger (long texts cut at clause marks, never truncated)."""
from __future__ import annotations

#: where :func:`tag_text` cuts a text longer than one window: after sentence and clause marks, full-width and ASCII
CLAUSE_MARKS = "。！？；，、：!?;,:"


def predict(model, tokenizer, texts, max_length: int, batch_size: int = 64, id2label=None) -> dict:
    """Classify ``texts`` (a list, or one ``str``) with a sequence-classification model, in eval mode under
    ``torch.inference_mode`` on its device, ``batch_size`` texts of similar length per forward pass; ``max_length``
    tokens per text (specials included; longer texts are truncated); ``id2label`` (id -> name) adds ``table``.

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
                 batch_size: int = 64, split: str | None = CLAUSE_MARKS) -> tuple[list[list[str]], dict]:
    """Tag every token of ``items`` (dicts with ``tokens``, e.g. one character each) with a token-classification
    model through the call a user makes on the exported folder, so the job's scores are the ones a user
    reproduces: :func:`tag_text` on each item's text (its tokens joined) with ``transformers``' token-classification
    pipeline, the tokenizer the export saves (:func:`nbkit.text.token_classification.char_tokenizer`),
    ``aggregation_strategy`` :data:`nbkit.text.token_classification.AGGREGATION`, ``model_max_length`` =
    ``max_length`` and the run's ``stride``; each token takes the span holding its first character
    (:func:`nbkit.evaluate.ner_report.pipeline_tags`). Long sentences are cut at ``split`` and windowed as
    :func:`tag_text` does: nothing is cut off, every token gets a tag. In eval mode, ``batch_size`` texts per call.

    Returns ``(tags, report)``: one list of label names per item, and the encoding's counts (``n_windows``,
    ``n_windowed``, ``stride``, ...: :func:`nbkit.text.token_classification.encode_token_classification`).

    Raises:
        ConfigError: ``model.config.id2label`` is not ``id2label`` (the pipeline names entities from the
            config), or from the encoding (a bad ``max_length`` or ``stride``, a slow tokenizer).
        DataError: from the encoding (an empty item).
    """
    import copy
    import functools

    from transformers import pipeline

    from nbkit.errors import ConfigError
    from nbkit.evaluate.ner_report import pipeline_tags
    from nbkit.switches import model_mode
    from nbkit.text.token_classification import AGGREGATION, char_tokenizer, encode_token_classification

    id2label = {int(k): str(v) for k, v in id2label.items()}
    items = [{"tokens": it["tokens"]} for it in items]          # tags, if any, play no part in prediction
    enc = encode_token_classification(items, tokenizer, {v: k for k, v in id2label.items()}, max_length, stride)
    inner = getattr(model, "module", model)                     # DDP
    inner = getattr(inner, "_orig_mod", inner)                  # torch.compile
    named = {int(k): str(v) for k, v in (inner.config.id2label or {}).items()}
    if named != id2label:
        raise ConfigError(f"the model's config.id2label {named} is not the labels given {id2label}; build the "
                          "classifier with id2label=... (nbkit.models.bert.build_classifier) so its entities are named")
    tok = char_tokenizer(tokenizer)
    tok = copy.deepcopy(tok) if tok is tokenizer else tok
    tok.model_max_length = max_length                           # as the export writes it
    pipe = pipeline("token-classification", model=inner, tokenizer=tok, aggregation_strategy=AGGREGATION,
                    device=next(inner.parameters()).device)
    with model_mode(inner, training=False):
        tags = pipeline_tags(functools.partial(tag_text, pipe, split=split), items, batch_size=batch_size,
                             stride=enc.report["stride"], plain_text=True)
    return tags, enc.report


def tag_text(tagger, texts, split: str | None = CLAUSE_MARKS, stride: int | None = None, batch_size: int = 32):
    """Entities of plain text from a token-classification ``pipeline`` (e.g. the NER export loaded with
    ``pipeline("token-classification", model=dir, aggregation_strategy="first")``): for one ``str`` one flat list of
    ``{"entity_group", "start", "end", "word", "score"}`` (``start``/``end``: character offsets into the text), for
    a list of texts one such list per text.

    A text longer than one window (``tagger.tokenizer.model_max_length - 2`` tokens) is never cut: with ``split``
    it is cut after each of those characters (closing quotes stay with the mark) and each piece tagged alone, the
    offsets moved back into the text; a piece (or, with ``split=None``, the text) still longer than a window is
    tagged in windows sharing ``stride`` tokens (None: the export's ``config.task_specific_params`` value, else a
    quarter of the window) and their entities merged by the pipeline. A text of one window is tagged whole.

    Raises:
        ConfigError: ``texts`` holds something other than strings (pass plain text; for characters as words
            call the pipeline itself).
    """
    from nbkit.errors import ConfigError

    one = isinstance(texts, str)
    texts = [texts] if one else list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise ConfigError(f"tag_text takes plain strings; texts at indices {bad[:10]} are "
                          f"{type(texts[bad[0]]).__name__}: join a list of characters with ''.join(chars)")
    tok = tagger.tokenizer
    body = int(tok.model_max_length) - 2
    if stride is None:
        params = (getattr(tagger.model.config, "task_specific_params", None) or {}).get("token-classification") or {}
        stride = int(params.get("stride", body // 4))
    pieces = []                                                     # (text index, offset, piece)
    for i, text in enumerate(texts):
        if not text:
            continue                                                # no token, no entity
        if not split or len(tok(text, add_special_tokens=False, verbose=False)["input_ids"]) <= body:
            pieces.append((i, 0, text))
        else:
            pieces.extend((i, offset, piece) for offset, piece in clause_pieces(text, split))
    outs = tagger([p for _, _, p in pieces], batch_size=batch_size, stride=stride) if pieces else []
    spans = [[] for _ in texts]
    for (i, offset, _), found in zip(pieces, outs):
        spans[i].extend({**s, "start": int(s["start"]) + offset, "end": int(s["end"]) + offset} for s in found)
    return spans[0] if one else spans


def clause_pieces(text: str, marks: str = CLAUSE_MARKS) -> list[tuple[int, str]]:
    """``text`` cut after each character of ``marks`` (closing quotes and brackets that follow stay with it), as
    ``(character offset, piece)`` in order; the pieces joined are ``text``."""
    import re

    out, start = [], 0
    for m in re.finditer(f"[{re.escape(marks)}][”’」』）)]*", text):
        out.append((start, text[start:m.end()]))
        start = m.end()
    if start < len(text):
        out.append((start, text[start:]))
    return out
