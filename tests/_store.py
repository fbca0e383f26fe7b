"""Write a tiny prepared corpus store (format ``nbkit-corpus/1``, docs/corpus.md) for reader tests.

Independent of the writer (``nbkit.corpus.prepare_corpus``): the bundled tokenizer pipeline
(``nbkit.text.train_wordpiece``, or a given tokenizer) tokenizes each document word by word
(gold words, or jieba's), each document is followed by one ``[SEP]``, documents go to the
``validation`` split when ``i % heldout_every == 0``, and a split's stream is cut into shards of
at most ``shard_tokens`` tokens, so block reads cross shard boundaries.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def encode_docs(tokenizer, docs) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per document: ``(ids, word starts)`` with the trailing ``[SEP]`` (word start 1)."""
    from nbkit.text.words import segment

    words = [list(d) if not isinstance(d, str) else None for d in docs]
    todo = [i for i, w in enumerate(words) if w is None]
    for i, w in zip(todo, segment([docs[i] for i in todo])):
        words[i] = w
    ids_out, wst_out = [], []
    for w in words:
        enc = tokenizer(w, is_split_into_words=True, add_special_tokens=False)
        wid = enc.word_ids()
        starts = [1 if j == 0 or wid[j] != wid[j - 1] else 0 for j in range(len(wid))]
        ids_out.append(np.asarray(enc["input_ids"] + [tokenizer.sep_token_id], dtype=np.int64))
        wst_out.append(np.asarray(starts + [1], dtype=np.uint8))
    return ids_out, wst_out


def write_store(out, docs, tokenizer=None, shard_tokens: int = 500, heldout_every: int = 10,
                vocab_size: int = 600, dtype: str = "uint16") -> Path:
    """Write a complete store of ``docs`` (str, or a list of gold words) to ``out``; return ``out``."""
    from nbkit.text.tokenizer import train_wordpiece

    out = Path(out)
    (out / "shards").mkdir(parents=True, exist_ok=True)
    texts = ["".join(d) if not isinstance(d, str) else d for d in docs]
    if tokenizer is None:
        tokenizer = train_wordpiece(texts, vocab_size=vocab_size, out_dir=out / "tokenizer", model_max_length=512)
    else:
        tokenizer.save_pretrained(str(out / "tokenizer"))
    ids, wst = encode_docs(tokenizer, docs)
    splits = {}
    for split, keep in (("train", lambda i: i % heldout_every != 0), ("validation", lambda i: i % heldout_every == 0)):
        idx = [i for i in range(len(docs)) if keep(i)]
        stream = np.concatenate([ids[i] for i in idx]) if idx else np.zeros(0, np.int64)
        starts = np.concatenate([wst[i] for i in idx]) if idx else np.zeros(0, np.uint8)
        shards = []
        for k, lo in enumerate(range(0, len(stream), shard_tokens)):
            name = f"{split}-{k:05d}"
            stream[lo:lo + shard_tokens].astype(f"<{dtype[0]}{np.dtype(dtype).itemsize}").tofile(out / "shards" / f"{name}.ids")
            starts[lo:lo + shard_tokens].tofile(out / "shards" / f"{name}.wst")
            shards.append({"name": name, "n_tokens": int(min(shard_tokens, len(stream) - lo)), "n_docs": None})
        splits[split] = {"shards": shards, "n_tokens": int(len(stream)), "n_docs": len(idx)}
    manifest = {"format": "nbkit-corpus/1", "complete": True, "nbkit_version": "test", "settings": {},
                "sources": [], "tokenizer": {"dir": "tokenizer", "vocab_size": len(tokenizer), "trained_on": "test"},
                "dtype": dtype, "sep_id": tokenizer.sep_token_id, "cls_id": tokenizer.cls_token_id,
                "splits": splits, "heldout": {"share": 1 / heldout_every, "rule": "i % heldout_every == 0"},
                "counts": {"n_tokens": sum(s["n_tokens"] for s in splits.values())}, "dropped": {}, "repaired": {},
                "problems": [], "timing": {}}
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return out


def stream(out, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """The split's whole stream ``(ids, word starts)`` read back from the shard files (test oracle)."""
    m = json.loads((Path(out) / "manifest.json").read_text())
    ids = [np.fromfile(Path(out) / "shards" / f"{s['name']}.ids", dtype=m["dtype"]) for s in m["splits"][split]["shards"]]
    wst = [np.fromfile(Path(out) / "shards" / f"{s['name']}.wst", dtype=np.uint8) for s in m["splits"][split]["shards"]]
    return np.concatenate(ids).astype(np.int64), np.concatenate(wst)
