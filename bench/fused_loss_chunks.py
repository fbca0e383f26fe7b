"""Benchmark: a causal LM's output layer + cross-entropy, unfused vs fused at several chunk sizes.

Unfused: ``F.cross_entropy(hidden @ weight.T, labels, reduction="sum")`` and its backward, the (N, V) logits
held as transformers' ``GPT2LMHeadModel`` holds them. Fused: ``nbkit.train.loss.linear_cross_entropy_sum`` at
``--chunks`` rows per chunk. Liger-Kernel's ``LigerFusedLinearCrossEntropyLoss(reduction="sum")``, the fused
kernel a transformers user would add, is an arm where it imports (its Triton kernels need a GPU; the record says
why it is absent otherwise). One forward + backward is timed per call; the arms alternate within each of
``--rounds`` rounds so drift in machine load hits all of them; prints each arm's median seconds per call, its
speed-up over unfused and, on a GPU, its peak memory over the inputs (``torch.cuda.max_memory_allocated``), and
writes them to ``--out`` (JSON), with each arm's loss over the unfused one (``loss_over_unfused``: 1 where the arm
computes the same sum). The shapes default to the causal benchmark's (``bench/causal_vs_trainer.py``: batch 16 x
block 128 = 2,048 rows, ``gpt2-narrow``'s d=128, the 21,128-entry BERT vocabulary);
:data:`nbkit.train.loss.CHUNK_ROWS` is chosen from this run.

    python bench/fused_loss_chunks.py                         # CPU, torch's threads
    python bench/fused_loss_chunks.py --device cuda --dtype bf16 --rows 8192 --dim 768 --chunks 256 512 1024 2048
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2048, help="N: scored positions per step (batch x block)")
    ap.add_argument("--dim", type=int, default=128, help="d: hidden size")
    ap.add_argument("--vocab", type=int, default=21128, help="V: output classes")
    ap.add_argument("--chunks", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=3, help="timed calls per arm and round")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="of the hidden states and weight")
    ap.add_argument("--no-liger", action="store_true", help="leave Liger-Kernel's arm out")
    ap.add_argument("--machine", default=f"{platform.system()} {platform.machine()}, {torch.get_num_threads()} threads")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    a = ap.parse_args(argv)
    dev = torch.device(a.device)
    g = torch.Generator().manual_seed(0)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    hidden = torch.randn(a.rows, a.dim, generator=g).to(dev, dtype).requires_grad_()           # (N, d)
    weight = (torch.randn(a.vocab, a.dim, generator=g) * 0.02).to(dev, dtype).requires_grad_()  # (V, d)
    labels = torch.randint(0, a.vocab, (a.rows,), generator=g).to(dev)                  # (N,)

    def unfused():
        return torch.nn.functional.cross_entropy((hidden @ weight.T).float(), labels, reduction="sum")

    losses = {"unfused": unfused}
    losses.update({f"chunk_{c}": (lambda c=c: linear_cross_entropy_sum(hidden, weight, labels, c)) for c in a.chunks})
    absent = {}
    if not a.no_liger:
        try:
            from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

            liger = LigerFusedLinearCrossEntropyLoss(reduction="sum")
            losses["liger"] = lambda: liger(weight, hidden, labels)
            losses["liger"]().backward()
        except Exception as e:                    # not installed, or no GPU for its Triton kernels
            losses.pop("liger", None)
            absent["liger"] = f"{type(e).__name__}: {e}"[:300]
    reference = float(unfused().detach())
    agree = {k: float(f().detach()) / reference for k, f in losses.items()}
    arms = {k: (lambda f=f: f().backward()) for k, f in losses.items()}
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {k: [] for k in arms}
    peak_mib: dict[str, float] = {}
    for _ in range(a.rounds):
        for name, f in arms.items():
            hidden.grad = weight.grad = None
            if dev.type == "cuda":
                sync()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            f()                                   # warm: allocator, kernels
            sync()
            if dev.type == "cuda":
                peak_mib[name] = max(peak_mib.get(name, 0.0), (torch.cuda.max_memory_allocated() - base) / 2**20)
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            sync()
            times[name].append((time.perf_counter() - t0) / a.calls)
            hidden.grad = weight.grad = None
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"what": "output layer + cross-entropy forward and backward, seconds per call", "device": a.device,
           "dtype": a.dtype, "machine": a.machine, "rows": a.rows, "dim": a.dim, "vocab": a.vocab,
           "rounds": a.rounds, "calls": a.calls, "median_s": med,
           "speedup_over_unfused": {k: med["unfused"] / v for k, v in med.items()},
           "loss_over_unfused": agree, "peak_mib_over_inputs": peak_mib or None, "absent": absent,
           "per_round_s": times, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    for k, v in med.items():
        mem = f"   peak {peak_mib[k]:8,.0f} MiB" if k in peak_mib else ""
        print(f"{k:>12}: {v * 1e3:8.1f} ms per call   {med['unfused'] / v:5.2f}x unfused   loss x{agree[k]:.5f}{mem}")
    for k, why in absent.items():
        print(f"{k:>12}: absent ({why})")
    path = a.out or ROOT / "bench" / "results" / f"fused_loss_chunks_{dev.type}_{time.strftime('%Y-%m-%d')}.json"
    write_json(path, out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
