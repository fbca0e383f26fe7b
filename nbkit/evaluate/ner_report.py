"""Reading named-entity predictions: the error table (missed and spurious entities in context), the scores
table of several taggers, and a ``transformers`` pipeline's spans turned back into per-character tags.

Entities are read from BIO tags by :func:`nbkit.data.ner.entity_spans` (seqeval's reading, the one its scores
use: an ``I-X`` that continues nothing starts an entity).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nbkit.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def entity_errors(tokens, gold, pred, context: int = 5) -> "pd.DataFrame":
    """One row per entity the prediction got wrong, over a split.

    ``tokens``: per sentence its tokens (characters); ``gold``, ``pred``: per sentence its BIO tags. A gold
    entity not predicted with the same type and boundaries is ``missed``; a predicted one not in the gold,
    ``spurious``. Columns: ``sentence`` (index), ``kind``, ``type``, ``entity`` (its text), ``left`` / ``right``
    (``context`` tokens either side), ``other`` (the other side's entities overlapping it, ``"LOC 北京"``; empty:
    nothing there). Sorted by sentence and position.

    Raises:
        DataError: the three disagree in sentence count or a sentence's length.
    """
    import pandas as pd

    from nbkit.data.ner import entity_spans

    if not len(tokens) == len(gold) == len(pred):
        raise DataError(f"entity_errors got {len(tokens)} sentences, {len(gold)} gold and {len(pred)} predicted "
                        "tag lists; pass one of each per sentence")
    rows = []
    for i, (toks, g, p) in enumerate(zip(tokens, gold, pred)):
        if not len(toks) == len(g) == len(p):
            raise DataError(f"sentence {i}: {len(toks)} tokens, {len(g)} gold and {len(p)} predicted tags")
        ge, pe = set(entity_spans(g)), set(entity_spans(p))
        join = "".join if all(len(t) == 1 for t in toks) else " ".join
        for kind, mine, theirs in (("missed", ge - pe, pe), ("spurious", pe - ge, ge)):
            for typ, s, e in mine:
                other = sorted((o for o in theirs if o[1] < e and s < o[2]), key=lambda o: o[1])
                rows.append({"sentence": i, "kind": kind, "type": typ, "entity": join(toks[s:e]),
                             "left": join(toks[max(0, s - context):s]), "right": join(toks[e:e + context]),
                             "other": ", ".join(f"{t} {join(toks[a:b])}" for t, a, b in other), "_start": s})
    columns = ["sentence", "kind", "type", "entity", "left", "right", "other"]
    if not rows:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(rows).sort_values(["sentence", "_start", "kind"])[columns].reset_index(drop=True)


def scores_table(results: dict[str, dict]) -> "pd.DataFrame":
    """Entity-level scores of several taggers side by side: name -> ``{"scores": entity_scores(...),
    "interval": (low, high) or None}``. Columns ``precision``, ``recall``, ``f1`` (micro, 0-1), ``f1 95 %``
    (the bootstrap interval) and ``f1 <TYPE>`` per entity type."""
    import pandas as pd

    rows = {}
    for name, r in results.items():
        s, ci = r["scores"], r.get("interval")
        row = {"precision": s["precision"], "recall": s["recall"], "f1": s["f1"],
               "f1 95 %": f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else ""}
        row.update({f"f1 {t}": v["f1"] for t, v in sorted(s.get("per_type", {}).items())})
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index").round(3)


def pipeline_tags(pipe, items, batch_size: int = 32, stride: int | None = None,
                  plain_text: bool = False) -> list[list[str]]:
    """Per-token BIO tags from a ``transformers`` token-classification pipeline with
    ``aggregation_strategy="first"`` (:data:`nbkit.text.token_classification.AGGREGATION`): each item's tokens go
    in as words (``is_split_into_words=True``, ``delimiter=""``: span offsets count the tokens joined), or with
    ``plain_text`` as one string (the call a user makes on text; the same offsets). Each token takes the span
    holding its first character: ``B-<group>`` where the span starts in that token, ``I-<group>`` where it started
    before, ``O`` outside every span.

    ``stride``: passed to the pipeline, which then tags a sentence longer than ``model_max_length`` in overlapping
    windows and merges their spans; None: the pipeline's default, which truncates such a sentence, so it finds no
    entity past the first window. Give the run's ``stride`` (``cfg.stride``)."""
    texts = [[str(t) for t in it["tokens"]] for it in items]
    if not texts:
        return []
    extra = {} if stride is None else {"stride": stride}
    if plain_text:
        outputs = pipe(["".join(words) for words in texts], batch_size=batch_size, **extra)
    else:
        outputs = pipe(texts, is_split_into_words=True, delimiter="", batch_size=batch_size, **extra)
    tags = []
    for words, spans in zip(texts, outputs):
        owner = [None] * sum(map(len, words))             # character -> the span holding it
        for span in spans:
            for k in range(int(span["start"]), int(span["end"])):
                owner[k] = span
        row, offset = [], 0
        for word in words:
            span = owner[offset] if offset < len(owner) else None
            if span is None or not word:
                row.append("O")
            else:
                row.append(("B-" if int(span["start"]) >= offset else "I-") + str(span["entity_group"]))
            offset += len(word)
        tags.append(row)
    return tags
