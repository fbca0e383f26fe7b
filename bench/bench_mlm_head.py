"""Benchmark: MLM training step with the head on every position vs on masked positions only.

Same model, same batches, same ``nbkit.train.loop.Loop.train_step``; only
``loop.sparse_head`` differs (``nbkit.models.mlm_head``). Rounds alternate full and
sparse so drift in machine load hits both; prints the median step time of each,
their ratio, and the model FLOPs per step the loop counts for each.

    python bench/bench_mlm_head.py [--preset mini] [--vocab 5691] [--batch 32] [--seq 128] [--rounds 5] [--threads 0]

Defaults are notebook 02's cpu scale (BERT-mini, the 5,691-token vocabulary the
cpu-scale tokenizer reaches, batch 32 x 128 tokens, 15 % masked).
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

import torch  # noqa: E402

from nbkit.models.bert import build_config  # noqa: E402
from nbkit.models.mlm_head import SparseHeadBertForMaskedLM  # noqa: E402
from nbkit.train import Loop, TrainConfig  # noqa: E402


def batches(n: int, batch: int, seq: int, vocab: int, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(5, vocab, (batch, seq), generator=g)             # (B, T)
        chosen = torch.rand(batch, seq, generator=g) < 0.15                  # (B, T)
        out.append({"input_ids": ids.masked_fill(chosen, 4), "attention_mask": torch.ones_like(ids),
                    "labels": ids.masked_fill(~chosen, -100)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="mini")
    ap.add_argument("--vocab", type=int, default=5691)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="steps per round and side")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = SparseHeadBertForMaskedLM(build_config(args.preset, args.vocab, max_position_embeddings=args.seq))
    loop = Loop(model, TrainConfig(max_steps=10**6, batch_size=args.batch, progress=False), [0],
                device=args.device)
    data = batches(args.steps, args.batch, args.seq, args.vocab)
    times: dict[str, list[float]] = {"full": [], "sparse": []}
    flops: dict[str, float] = {}
    loop.model.train()
    for r in range(args.rounds + 1):  # round 0 warms up both sides
        for name in ("full", "sparse"):
            loop.sparse_head = name == "sparse"
            if loop.device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for b in data:
                out = loop.train_step([b])      # the sync inside train_step ends each step
            dt = (time.perf_counter() - t0) / len(data)
            flops[name] = out["flops"]
            if r:
                times[name].append(dt)
    full, sparse = statistics.median(times["full"]), statistics.median(times["sparse"])
    print(f"BERT-{args.preset}, vocab {args.vocab}, batch {args.batch} x {args.seq} tokens, "
          f"{loop.device.type}, {loop.precision.name}, {args.rounds} rounds x {args.steps} steps")
    for name in ("full", "sparse"):
        print(f"{name:>6} head: median {statistics.median(times[name]) * 1e3:8.1f} ms/step   "
              f"runs {[round(t * 1e3) for t in times[name]]}   model FLOPs/step {flops[name] / 1e9:.2f} G")
    print(f"ratio sparse/full step time: {sparse / full:.3f}   FLOPs ratio: {flops['sparse'] / flops['full']:.3f}")


if __name__ == "__main__":
    main()
