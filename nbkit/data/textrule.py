"""One rule for what a valid text is, shared by every loader, encoder and ``predict()``.

A text is *valid* when, after repair, it holds at least one visible character. The rule:

1. ``None`` / NaN / a non-string value -> dropped as ``"missing"``.
2. Lone UTF-16 surrogates (``"\\ud83d"``, half an emoji as a JSON escape) are replaced by U+FFFD and
   counted as ``"repaired_surrogates"``; the text is kept (Arrow cannot read them).
3. A text whose every character is whitespace, a control character (Unicode category ``Cc``), a
   format character (``Cf``: zero-width joiner U+200D, word joiner U+2060, BOM U+FEFF, ...) or a
   separator (``Z*``, incl. the ideographic space U+3000) -> dropped as ``"blank"``: the tokenizer
   gives it no token, and a model would still give it a confident label.

``split_long`` cuts a long text into pieces of at most ``max_chars`` characters at sentence ends
(``。！？!?；;`` and line breaks), so per-row steps never see one giant row.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Any

#: Characters after which a long text may be cut (kept at the end of the piece).
SENTENCE_ENDS = "。！？!?；;\n"
_SURROGATE = re.compile("[\ud800-\udfff]")
_END = re.compile(f"[{re.escape(SENTENCE_ENDS)}]")
_INVISIBLE_CATS = ("Cc", "Cf", "Zs", "Zl", "Zp")

#: Longest corpus row, in characters, after :func:`cut_rows` (unlabelled text only: a labelled
#: text is never cut, its label belongs to the whole). 2,000 characters hold ~4x BERT's 512-token
#: window of Chinese (about one token per character), so MLM blocks lose nothing, while splits,
#: dedup and word segmentation work on rows of bounded size.
CORPUS_MAX_CHARS = 2000


def repair_surrogates(text: str) -> tuple[str, int]:
    """Replace lone surrogate code points with U+FFFD. Returns ``(text, n_replaced)``."""
    return _SURROGATE.subn("\ufffd", text)


def is_blank(text: str) -> bool:
    """True when ``text`` has no visible character (only whitespace, ``Cc``, ``Cf`` or ``Z*``)."""
    return all(ch.isspace() or unicodedata.category(ch) in _INVISIBLE_CATS for ch in text)


def check_text(value: Any, counts: Counter | None = None) -> str | None:
    """Apply the rule to one value a loader read (str, None, NaN, a number...): the valid text (surrogates
    repaired), or ``None`` when dropped. ``counts``: when given, incremented under ``"missing"``, ``"blank"``
    (drops) and ``"repaired_surrogates"`` (texts kept after repair).
    """
    if not isinstance(value, str):
        if counts is not None:
            counts["missing"] += 1
        return None
    text, n = repair_surrogates(value)
    if is_blank(text):
        if counts is not None:
            counts["blank"] += 1
        return None
    if n and counts is not None:
        counts["repaired_surrogates"] += 1
    return text


def split_long(text: str, max_chars: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``max_chars`` characters, each ending at the last sentence end
    (:data:`SENTENCE_ENDS`) inside its window, else cut hard. Joining the pieces gives ``text`` back exactly;
    blank pieces are kept (callers apply :func:`check_text`).

    Raises:
        ValueError: ``max_chars`` below 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars={max_chars} must be >= 1")
    if len(text) <= max_chars:
        return [text]
    pieces, start, n = [], 0, len(text)
    while n - start > max_chars:
        window = text[start:start + max_chars]
        cut = max((m.end() for m in _END.finditer(window)), default=0) or max_chars
        pieces.append(text[start:start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def cut_rows(texts: list[str], max_chars: int | None = CORPUS_MAX_CHARS) -> tuple[list[str], dict]:
    """Cut each text longer than ``max_chars`` (None: none) with :func:`split_long`; blank pieces dropped.

    Returns ``(pieces, info)``: the texts in order, long ones replaced by their pieces, and ``info`` =
    ``{"n_rows_cut", "largest_row_chars", "largest_row_share"}`` measured before the cut (``largest_row_share``:
    the longest text's share of all characters, 0-1).

    Raises:
        ValueError: ``max_chars`` below 1.
    """
    if max_chars is not None and max_chars < 1:
        raise ValueError(f"max_chars={max_chars} must be >= 1 (or None: no cut)")
    total = sum(len(t) for t in texts)
    largest = max((len(t) for t in texts), default=0)
    info = {"n_rows_cut": 0, "largest_row_chars": largest, "largest_row_share": largest / total if total else 0.0}
    if max_chars is None or largest <= max_chars:
        return list(texts), info
    out: list[str] = []
    for text in texts:
        if len(text) <= max_chars:
            out.append(text)
            continue
        info["n_rows_cut"] += 1
        out.extend(p.strip() for p in split_long(text, max_chars) if not is_blank(p))
    return out, info
