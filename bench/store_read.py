"""Read throughput of the corpus store: MLM blocks/s through MLMCollator vs what one H200 consumes.

Reads ``StoreMLMDataset`` blocks in random order (the training order) in batches of 128 blocks of
128 tokens, whole-word masked by ``nbkit.text.mlm.MLMCollator``, once in the main process and once
with DataLoader workers, and prints the blocks/s beside the GPU's demand: the tokens/s recorded on
one H200 (``bench/results/gpu_h200_2026-11-30``: 609 k tokens/s for the gpu preset's notebook 02,
docs/pretraining.md; 441,722 tokens/s for BERT-base in gpu_check's ``bert_eager``) divided by the
block size. Ratio > 1: the reader outpaces the GPU. ``--demand-json`` adds the demand measured in the same GPU
session: the nbkit arm's median tokens/s in a ``bench/continued_pretraining.py`` or ``bench/causal_vs_trainer.py``
record (its block size must equal ``--block-size``).

Without ``--store`` it writes a store of People's Daily (gold words) with ``tests/_store.py``'s
format writer, the stand-in until ``nbkit prepare-corpus`` is on main. The page cache is warm
after the first pass (a real multi-GB store on a local disk is read once per epoch; see docs/corpus.md).

    /work/main/.venv/bin/python bench/store_read.py [--store DIR] [--batches 60] [--workers 2]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

H200_TOKENS_PER_S = {"gpu preset, notebook 02 (mini)": 609_000, "BERT-base, gpu_check bert_eager": 441_722}


def measure(ds, collator, batch_size: int, batches: int, workers: int) -> float:
    """Blocks/s over ``batches`` batches (after 2 warm-up batches) from a shuffled DataLoader."""
    import torch

    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, collate_fn=collator,
                                         num_workers=workers, generator=torch.Generator().manual_seed(0),
                                         persistent_workers=False)
    it = iter(loader)
    for _ in range(2):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        batch = next(it)
    dt = time.perf_counter() - t0
    assert len(batch["input_ids"] if isinstance(batch, dict) else batch) == batch_size
    return batches * batch_size / dt


def blocks_only(examples: list) -> list:
    """A collate_fn that keeps the blocks as they are: the reader's own cost, no masking."""
    return examples


def build_store(out: pathlib.Path, lines: int | None) -> pathlib.Path:
    from _store import write_store
    from tokenizer_alphabet import peoples_daily_lines

    texts, words = peoples_daily_lines(lines, with_words=True)
    return write_store(out, [list(w) for w in words if w], shard_tokens=1 << 20, heldout_every=200, vocab_size=8000)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", type=pathlib.Path, default=None)
    ap.add_argument("--lines", type=int, default=None, help="People's Daily lines for the built store (all)")
    ap.add_argument("--block-size", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "bench" / "results" / "store_read.json")
    ap.add_argument("--demand-json", type=pathlib.Path, nargs="*", default=(),
                    help="records whose nbkit arm's median tokens/s is a demand to meet (same session, same block)")
    a = ap.parse_args(argv)
    import os

    import torch
    from transformers import AutoTokenizer

    from nbkit import jsonio
    from nbkit.corpus.dataset import StoreMLMDataset
    from nbkit.text.mlm import MLMCollator

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        store = a.store or build_store(pathlib.Path(tmp) / "store", a.lines)
        ds = StoreMLMDataset(store, a.block_size)
        collator = MLMCollator(AutoTokenizer.from_pretrained(store / "tokenizer"), whole_word=True)
        rows = {"main process, reader only": measure(ds, blocks_only, a.batch_size, a.batches, 0),
                "main process": measure(ds, collator, a.batch_size, a.batches, 0),
                f"{a.workers} DataLoader workers": measure(ds, collator, a.batch_size, a.batches, a.workers)}
        n_blocks, n_tokens = len(ds), ds.n_tokens
    demand = {k: v / a.block_size for k, v in H200_TOKENS_PER_S.items()}
    for path in a.demand_json:
        rec = jsonio.loads_strict(path.read_text(encoding="utf-8"))
        if rec.get("block", a.block_size) != a.block_size:
            raise SystemExit(f"{path}: block {rec['block']} != --block-size {a.block_size}; measure at the same block")
        demand[f"{path.stem}, nbkit arm"] = rec["median"]["nbkit"]["tokens_per_s"] / a.block_size
    print(f"store: {n_tokens:,} tokens, {n_blocks:,} blocks of {a.block_size}; batch {a.batch_size}, "
          f"{os.cpu_count()} CPUs")
    for name, rate in rows.items():
        ratios = "  ".join(f"{rate / need:5.2f}x {k}" for k, need in demand.items())
        print(f"{name:>25}: {rate:9,.0f} blocks/s ({rate * a.block_size / 1e6:5.2f} M tokens/s)  vs demand: {ratios}")
    for k, need in demand.items():
        print(f"{'the GPU consumes':>25}: {need:9,.0f} blocks/s  ({k})")
    result = {"block_size": a.block_size, "batch_size": a.batch_size, "batches": a.batches, "cpus": os.cpu_count(),
              "n_blocks": n_blocks, "n_tokens": n_tokens, "store": "given" if a.store else "People's Daily (built)",
              "read_blocks_per_s": rows, "demand_blocks_per_s": demand,
              "ratio": {r: {k: rate / need for k, need in demand.items()} for r, rate in rows.items()},
              "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    jsonio.write_json(a.out, result)
    print(f"recorded in {a.out}")
    return result


if __name__ == "__main__":
    main()
