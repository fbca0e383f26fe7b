"""DDP scaling of the pretraining job at ``smoke``: samples/s with 1 vs N processes, side by side in one run.

    python bench/ddp_scaling.py --nproc 2 [--device cpu|cuda] [--steps 40]

Each process keeps the same per-process batch (weak scaling), so the ideal ratio is N.
The job is the real loop (``nbkit.jobs.pretrain --scale smoke``: tiny BERT, bundled corpus),
so this measures the launcher + collective overhead (gloo on CPU, NCCL on GPU) on top of a
small model's compute: a lower bound on what DDP costs per step.
Throughput is taken from rank 0's NBKIT_METRICS log lines from the 5th step on (``samples_per_s``
over each step's window), so process start-up, rendezvous and evaluations are excluded.
"""
from __future__ import annotations

import argparse
import tempfile

from nbkit.jobs.launch import launch


def samples_per_s(nproc: int, device: str, steps: int, batch: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        h = launch("nbkit.jobs.pretrain", nproc_per_node=nproc, device=device, show=False,
                   env={"OMP_NUM_THREADS": "1"},  # torchrun sets 1 only for N > 1: same for both
                   args=["--scale", "smoke", "--max-steps", steps, "--batch-size", batch, "--grad-accum-steps", 1,
                         "--log-every", 1, "--checkpoint-every", 10 ** 9, "--output-dir", out, "--resume", "none"])
        h.wait()
    logs = [m for m in h.metrics if "loss" in m][4:]  # the loop's log lines (evaluations have no loss)
    # samples_per_s: all ranks' samples / the window's time (evaluation time is kept out of it)
    return sum(m["samples_per_s"] * m["window_s"] for m in logs) / sum(m["window_s"] for m in logs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=16)
    a = p.parse_args()
    # 1, N, 1, N: alternate and keep the best of each, to damp a noisy shared machine
    one = samples_per_s(1, a.device, a.steps, a.batch_size)
    many = samples_per_s(a.nproc, a.device, a.steps, a.batch_size)
    one = max(one, samples_per_s(1, a.device, a.steps, a.batch_size))
    many = max(many, samples_per_s(a.nproc, a.device, a.steps, a.batch_size))
    print(f"1 process : {one:10.1f} samples/s")
    print(f"{a.nproc} processes: {many:10.1f} samples/s")
    print(f"scaling ratio {many / one:.2f} (ideal {a.nproc}.00)")


if __name__ == "__main__":
    main()
