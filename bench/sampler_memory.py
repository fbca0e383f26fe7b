"""Sampler memory: nbkit's ResumableDistributedSampler vs torch's DistributedSampler on one epoch.

A 2 GB corpus store holds ~10.7 M blocks of 64 tokens; each epoch the sampler builds its global
order. ``torch.utils.data.DistributedSampler`` (the anchor) holds it as a Python list
(``torch.randperm(n).tolist()``, ~36 bytes per index plus its slices); nbkit's keeps an int64
array (8 bytes per index) and hands out Python ints in chunks. Each arm runs in its own process
(``n`` samples, world size 1, shuffled); the bench prints peak RSS above the interpreter's
baseline, the time to draw the whole epoch, and the ratios, and writes
``bench/results/sampler_memory.json``.

    .venv/bin/python bench/sampler_memory.py [--n 10700000]
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _arm(name: str, n: int) -> dict:
    import torch  # noqa: F401  (imported before the baseline so both arms pay it)
    from torch.utils.data import DistributedSampler

    from nbkit.train.ddp.sampler import ResumableDistributedSampler

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if name == "torch DistributedSampler":
        sampler = DistributedSampler(range(n), num_replicas=1, rank=0, shuffle=True, seed=0)
    else:
        sampler = ResumableDistributedSampler(n, num_replicas=1, rank=0, shuffle=True, seed=0)
    sampler.set_epoch(0)
    count, checksum = 0, 0
    for i in sampler:
        count += 1
        checksum ^= i
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"arm": name, "n": n, "drawn": count, "seconds": seconds, "peak_rss_above_base_mib": (peak - base) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_700_000, help="samples (blocks) in the epoch")
    ap.add_argument("--arm", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.arm:
        from nbkit import jsonio

        print(jsonio.dumps(_arm(args.arm, args.n)))
        return
    rows = []
    for arm in ("torch DistributedSampler", "nbkit ResumableDistributedSampler"):
        out = subprocess.run([sys.executable, __file__, "--n", str(args.n), "--arm", arm],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{arm:36s} {r['drawn']:>11,} indices  {r['seconds']:6.2f} s  peak RSS +{r['peak_rss_above_base_mib']:7.1f} MiB")
    a, b = rows
    ratio = {"memory_torch_over_nbkit": a["peak_rss_above_base_mib"] / max(b["peak_rss_above_base_mib"], 1e-9),
             "time_torch_over_nbkit": a["seconds"] / b["seconds"]}
    print(f"ratios torch/nbkit: memory x{ratio['memory_torch_over_nbkit']:.1f}, time x{ratio['time_torch_over_nbkit']:.2f}")
    from nbkit import jsonio

    jsonio.write_json(ROOT / "bench" / "results" / "sampler_memory.json",
                      {"machine": f"{platform.machine()} {platform.system()}, {__import__('os').cpu_count()} cores",
                       "date": time.strftime("%Y-%m-%d"), "arms": rows, "ratios": ratio})


if __name__ == "__main__":
    main()
