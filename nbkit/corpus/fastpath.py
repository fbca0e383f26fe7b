"""Token ids and word starts of a chunk of texts, CJK ideographs and punctuation by code-point table lookup.

In BERT's Chinese pipeline each of those is a one-character word, on which ``tokenizers`` spends most of its
time; only the runs between them go through ``encode_batch``. The ids equal ``tokenizer.encode(text,
add_special_tokens=False)``'s, except that a literal ``"[SEP]"`` in a text stays its characters. A token
starts a word when its first character lies in another segmenter word than the previous token's; without a
segmenter (``segmenter="none"``), when it is not a WordPiece continuation (``##``): the tokenizer's own words.
"""
from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable

import numpy as np

# The ranges both BERT's Python is_chinese_char and tokenizers' Rust one treat as CJK (they differ
# beyond the BMP, which goes through the tokenizer instead).
_CJK_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))


def _bert_normalizer(spec: dict) -> dict | None:
    """The ``BertNormalizer`` (Chinese characters split) of BERT's WordPiece pipeline, NFKC at most beside it;
    None for another pipeline."""
    norm, pre, model = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}, spec.get("model") or {}
    parts = norm.get("normalizers", []) if norm.get("type") == "Sequence" else [norm]
    berts = [p for p in parts if p.get("type") == "BertNormalizer"]
    others_ok = all(p.get("type") in ("BertNormalizer", "NFKC") for p in parts)
    ok = (len(berts) == 1 and berts[0].get("handle_chinese_chars") and others_ok
          and pre.get("type") == "BertPreTokenizer" and model.get("type") == "WordPiece")
    return berts[0] if ok else None


def lookup_table(tokenizer_file: str) -> np.ndarray:
    """Code point -> token id for the one-character words, -1 elsewhere: int32 (0x110000,), 4.4 MB. All -1
    for a pipeline other than BERT's Chinese one; with accent stripping (NFD first), the characters NFD
    changes are left to the tokenizer."""
    with open(tokenizer_file, encoding="utf-8") as fh:
        spec = json.load(fh)
    table = np.full(0x110000, -1, dtype=np.int32)
    bert = _bert_normalizer(spec)
    if bert is None:
        return table
    vocab = spec["model"]["vocab"]
    unk = vocab[spec["model"].get("unk_token", "[UNK]")]
    chars = [c for lo, hi in _CJK_RANGES for c in range(lo, hi + 1)]
    chars += [c for c in range(0x80, 0x10000) if unicodedata.category(chr(c)).startswith("P")
              and not (0xD800 <= c <= 0xDFFF)]
    chars += [ord(c) for c in "!\"#%&'()*,-./:;?@[\\]_{}"]  # ASCII punctuation of category P*
    strip = bert.get("strip_accents")
    if bert.get("lowercase") if strip is None else strip:  # NFD first: keep only the characters it leaves alone
        chars = [c for c in chars if unicodedata.normalize("NFD", chr(c)) == chr(c)]
    table[chars] = unk
    for token, i in vocab.items():
        if len(token) == 1 and table[ord(token)] >= 0:
            table[ord(token)] = i
    return table


def continuation_mask(tokenizer_file: str) -> np.ndarray:
    """Token id -> whether it continues a word (a WordPiece ``##`` piece): bool ``(vocab size,)``, all False for
    a model without a continuation prefix. The word starts of a store without a segmenter."""
    with open(tokenizer_file, encoding="utf-8") as fh:
        spec = json.load(fh)
    model = spec.get("model") or {}
    vocab = model.get("vocab") if isinstance(model.get("vocab"), dict) else {}
    ids = [int(i) for i in vocab.values()] + [int(t["id"]) for t in spec.get("added_tokens") or []]
    mask = np.zeros(max(ids, default=-1) + 1, dtype=bool)
    prefix = model.get("continuing_subword_prefix") if model.get("type") == "WordPiece" else None
    if prefix:
        mask[[i for t, i in vocab.items() if t.startswith(prefix) and len(t) > len(prefix)]] = True
    return mask


def _word_index(texts: list[str], cut: Callable[[str], list[str]], n_chars: int) -> np.ndarray:
    r"""The segmenter word (a running number) of each character of ``"\n".join(texts)``: int64 ``(n_chars,)``; each
    ``"\n"`` between texts is a word of its own, and a text whose words do not join to it is one word per character."""
    words, per_text = [], []
    for t in texts:
        ws = cut(t)
        words.extend(ws)
        words.append("\n")
        per_text.append(len(ws) + 1)
    lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    first = np.cumsum([0] + per_text[:-1])
    bad = np.add.reduceat(lens, first) != np.asarray([len(t) + 1 for t in texts], dtype=np.int64)
    if bad.any():
        parts, k = [], 0
        for t, n, b in zip(texts, per_text, bad.tolist()):
            parts.append(np.ones(len(t) + 1, np.int64) if b else lens[k:k + n])
            k += n
        lens = np.concatenate(parts)
    starts = np.zeros(n_chars + 1, dtype=np.int64)
    starts[np.cumsum(lens)[:-1]] = 1
    return np.cumsum(starts[:n_chars])


#: characters one pass of :func:`encode_texts` holds: a pass takes ~100 bytes per character (its index arrays and the
#: segmenter's words), so a chunk of many characters (one 30 MB line cut into pieces) is encoded pass by pass
PASS_CHARS = 1 << 20


def encode_texts(texts: list[str], tok, table: np.ndarray, cut: Callable[[str], list[str]] | None,
                 continuation: np.ndarray | None = None):
    """``(ids, wst, counts)`` of the chunk, no ``[SEP]``: ``ids`` (t,) int64 in text order, ``wst`` (t,) uint8,
    ``counts`` (n_texts,) int64 tokens per text (0: none). ``cut``: text -> words that join to it; None: no
    segmenter, a token starts a word unless ``continuation[id]`` (:func:`continuation_mask`). Texts are encoded in
    passes of about :data:`PASS_CHARS` characters (whole texts; each is encoded on its own, so the result is the
    same): working memory ~100 MB per pass, whatever the chunk's size."""
    passes, group, size = [], [], 0
    for t in texts:
        if group and size + len(t) > PASS_CHARS:
            passes.append(group)
            group, size = [], 0
        group.append(t)
        size += len(t)
    if len(passes) == 0:
        return _encode_pass(texts, tok, table, cut, continuation)
    parts = [_encode_pass(g, tok, table, cut, continuation) for g in [*passes, group]]
    return tuple(np.concatenate(x) for x in zip(*parts))


def _encode_pass(texts: list[str], tok, table: np.ndarray, cut: Callable[[str], list[str]] | None,
                 continuation: np.ndarray | None):
    if not texts:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.int64)
    joined = "\n".join(texts)
    cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    looked = table[cps]
    fast = looked >= 0
    starts_fast = np.flatnonzero(fast)
    # runs of the other characters, each tokenized as its own string (their neighbours are word breaks)
    if fast.any() or table.max() >= 0:  # BERT's pipeline: the "\n" between texts is a word break
        edges = np.flatnonzero(np.diff(np.concatenate(([1], fast.view(np.int8), [1]))))
        run_lo, run_hi = edges[0::2], edges[1::2]
    else:  # another pipeline: each text on its own (a separator might otherwise become a token)
        run_lo = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]])
        run_hi = run_lo + np.asarray([len(t) for t in texts])
    runs = [joined[a:b] for a, b in zip(run_lo.tolist(), run_hi.tolist())]
    encs = tok.encode_batch(runs, add_special_tokens=False) if runs else []
    run_ids, run_pos = [], []
    for lo, enc in zip(run_lo.tolist(), encs):
        if enc.ids:
            run_ids.extend(enc.ids)
            run_pos.extend(lo + o[0] for o in enc.offsets)
    pos = np.concatenate([starts_fast, np.asarray(run_pos, dtype=np.int64)])
    ids = np.concatenate([looked[starts_fast].astype(np.int64), np.asarray(run_ids, dtype=np.int64)])
    order = np.argsort(pos, kind="stable")
    pos, ids = pos[order], ids[order]
    if cut is None:
        if continuation is None:
            raise ValueError("encode_texts without a segmenter (cut=None) needs the continuation mask")
        inside = ids < len(continuation)
        wst = np.ones(len(ids), dtype=np.uint8)
        wst[inside] = ~continuation[ids[inside]]
    else:
        w = _word_index(texts, cut, len(cps))[pos]
        wst = np.ones(len(w), dtype=np.uint8)
        if len(w) > 1:
            wst[1:] = w[1:] != w[:-1]
    doc_start = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]])
    counts = np.bincount(np.searchsorted(doc_start, pos, side="right") - 1, minlength=len(texts))
    return ids, wst, counts.astype(np.int64)
