"""MLM pipeline benchmark on People's Daily: block building and masking, side by side.

Prints (1) make_blocks time and block count, token-level vs word-aware
(``words`` column, for whole-word masking); (2) collator batches/s for
nbkit's MLMCollator (token-level and whole-word) vs
``transformers.DataCollatorForLanguageModeling`` on the same blocks, as ratios,
plus how often each produced a row without any target and how many random
replacements were special tokens.

    /work/main/.venv/bin/python bench/mlm_pipeline.py [--lines 19484] [--block-size 128] [--batches 200]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizer_alphabet import peoples_daily_lines  # noqa: E402

from nbkit.text.mlm import MLMCollator, make_blocks  # noqa: E402
from nbkit.text.tokenizer import train_wordpiece  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=None)
    ap.add_argument("--block-size", type=int, default=128)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    texts, words = peoples_daily_lines(args.lines, with_words=True)
    ds = Dataset.from_dict({"text": texts, "words": words})
    with tempfile.TemporaryDirectory() as d:
        tok = train_wordpiece(iter(texts), 8000, d, 512)
    t0 = time.perf_counter()
    plain = make_blocks(ds, tok, args.block_size)
    t1 = time.perf_counter()
    wwm = make_blocks(ds, tok, args.block_size, words_column="words")
    t2 = time.perf_counter()
    print(f"corpus {len(ds)} lines; make_blocks({args.block_size}): {len(plain)} blocks in {t1 - t0:.2f} s; "
          f"word-aware: {len(wwm)} blocks in {t2 - t1:.2f} s (ratio {(t2 - t1) / (t1 - t0):.2f}x)")

    from transformers import DataCollatorForLanguageModeling

    special = torch.tensor(tok.all_special_ids)
    rows_plain = [{"input_ids": r} for r in plain["input_ids"]]
    rows_wwm = [{"input_ids": a, "word_ids": b} for a, b in zip(wwm["input_ids"], wwm["word_ids"])]
    candidates = {
        "nbkit MLMCollator": (MLMCollator(tok, seed=0), rows_plain),
        "nbkit MLMCollator (whole word)": (MLMCollator(tok, seed=0), rows_wwm),
        "HF DataCollatorForLanguageModeling": (DataCollatorForLanguageModeling(tok, mlm_probability=0.15, seed=0),
                                               rows_plain),
    }
    rates = {}
    for name, (coll, rows) in candidates.items():
        empty = special_random = targets = real = 0
        t = time.perf_counter()
        for b in range(args.batches):
            start = (b * args.batch_size) % max(1, len(rows) - args.batch_size)
            batch = coll(rows[start:start + args.batch_size])
            tgt = batch["labels"] != -100
            empty += int((tgt.sum(1) == 0).sum())
            changed = tgt & (batch["input_ids"] != tok.mask_token_id)
            special_random += int(torch.isin(batch["input_ids"][changed], special).sum())
            targets += int(tgt.sum())
            real += int(batch["attention_mask"].sum()) - 2 * tgt.shape[0]
        rates[name] = args.batches / (time.perf_counter() - t)
        print(f"{name:36s} {rates[name]:8.1f} batches/s  target rate {targets / real:.4f}  "
              f"rows without target {empty}  special tokens used as random replacement {special_random}")
    base = rates["HF DataCollatorForLanguageModeling"]
    for name, r in rates.items():
        print(f"ratio {name} / HF: {r / base:.2f}x")


if __name__ == "__main__":
    main()
