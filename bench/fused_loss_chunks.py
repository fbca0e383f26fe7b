"""Benchmark: a causal LM's output layer + cross-entropy, unfused vs fused at several chunk sizes.

Unfused: ``F.cross_entropy(hidden @ weight.T, labels, reduction="sum")`` and its backward, the (N, V) logits
held as transformers' ``GPT2LMHeadModel`` holds them. Fused: ``nbkit.train.loss.linear_cross_entropy_sum`` at
``--chunks`` rows per chunk. One forward + backward is timed per call; the arms alternate within each of
``--rounds`` rounds so drift in machine load hits all of them; prints each arm's median seconds per call and
its speed-up over unfused, and writes them to ``--out`` (JSON). The shapes default to the causal benchmark's
(``bench/causal_vs_trainer.py``: batch 16 x block 128 = 2,048 rows, ``gpt2-narrow``'s d=128, the 21,128-entry
BERT vocabulary); :data:`nbkit.train.loss.CHUNK_ROWS` is chosen from this run.

    python bench/fused_loss_chunks.py                         # CPU, torch's threads
    python bench/fused_loss_chunks.py --device cuda --rows 8192 --dim 256 --chunks 256 512 1024 2048
"""
from __future__ import annotations

import argparse
import pathlib
import platform
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

import torch  # noqa: E402

from nbkit.jsonio import write_json  # noqa: E402
from nbkit.train.loss import linear_cross_entropy_sum  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2048, help="N: scored positions per step (batch x block)")
    ap.add_argument("--dim", type=int, default=128, help="d: hidden size")
    ap.add_argument("--vocab", type=int, default=21128, help="V: output classes")
    ap.add_argument("--chunks", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=3, help="timed calls per arm and round")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--machine", default=f"{platform.system()} {platform.machine()}, {torch.get_num_threads()} threads")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    a = ap.parse_args()
    dev = torch.device(a.device)
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(a.rows, a.dim, generator=g).to(dev).requires_grad_()           # (N, d)
    weight = (torch.randn(a.vocab, a.dim, generator=g) * 0.02).to(dev).requires_grad_()  # (V, d)
    labels = torch.randint(0, a.vocab, (a.rows,), generator=g).to(dev)                  # (N,)

    def unfused():
        torch.nn.functional.cross_entropy(hidden @ weight.T, labels, reduction="sum").backward()

    arms = {"unfused": unfused}
    arms.update({f"chunk_{c}": (lambda c=c: linear_cross_entropy_sum(hidden, weight, labels, c).backward())
                 for c in a.chunks})
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(a.rounds):
        for name, f in arms.items():
            f()                                   # warm: allocator, kernels
            sync()
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            sync()
            times[name].append((time.perf_counter() - t0) / a.calls)
            hidden.grad = weight.grad = None
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"what": "output layer + cross-entropy forward and backward, seconds per call", "device": a.device,
           "machine": a.machine, "rows": a.rows, "dim": a.dim, "vocab": a.vocab, "rounds": a.rounds,
           "calls": a.calls, "median_s": med, "speedup_over_unfused": {k: med["unfused"] / v for k, v in med.items()},
           "per_round_s": times, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    for k, v in med.items():
        print(f"{k:>12}: {v * 1e3:8.1f} ms per call   {med['unfused'] / v:5.2f}x unfused")
    path = a.out or ROOT / "bench" / "results" / f"fused_loss_chunks_{a.device}_{time.strftime('%Y-%m-%d')}.json"
    write_json(path, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
