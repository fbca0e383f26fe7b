"""Benchmark: cost of GPU telemetry, measured side by side in one run.

1. One NVML sample of every metric (``nbkit.gpu.nvml.Nvml.sample``) vs one
   ``nvidia-smi --query-gpu=...`` subprocess call with the same fields: median
   wall time of each and their ratio. Without a GPU (or nvidia-smi) the real
   comparison is skipped with a message and the sample time of the fake NVML
   (``nbkit.gpu.nvml_fake``, pure-Python overhead of building snapshots) is shown
   instead, labelled as the fake.
2. Training throughput (tokens/s) of a tiny BERT MLM with the monitor sampling
   at ``--interval`` (default 1 s) vs without, alternating A/B runs so drift in
   machine load hits both sides. Target: under 1% cost.

Usage: ``python bench/bench_nvml.py [--runs 3] [--seconds 6] [--interval 1.0] [--fake] [--threads 1]``
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/nvml_fake.py, the NVML test double

SMI_FIELDS = ("index,name,utilization.gpu,utilization.memory,memory.used,memory.total,"
              "temperature.gpu,power.draw,enforced.power.limit,clocks.sm,clocks.mem")


def _median_time(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_sampling(n: int) -> None:
    from nbkit.gpu.nvml import Nvml
    from tests.nvml_fake import FakeGpu, FakeNvml, h100_mig_child

    nv = Nvml()
    smi = shutil.which("nvidia-smi")
    print("== 1. one sample of all metrics")
    if nv.state.ok and smi:
        nv.sample()  # warm
        for pcie in (False, True):
            nv.pcie = pcie
            t_nvml = _median_time(nv.sample, n)
            print(f"NVML sample, {nv.device_count()} GPU(s), pcie={pcie}: {t_nvml * 1e3:8.2f} ms")
        nv.pcie = False
        t_nvml = _median_time(nv.sample, n)
        cmd = [smi, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
        t_smi = _median_time(lambda: subprocess.run(cmd, capture_output=True, check=True), max(3, n // 10))
        print(f"nvidia-smi --query-gpu call:           {t_smi * 1e3:8.2f} ms")
        print(f"ratio nvidia-smi / NVML (same fields, no PCIe): {t_smi / t_nvml:8.1f}x")
    else:
        print(f"real comparison skipped: NVML {nv.state.name}, nvidia-smi "
              f"{'found' if smi else 'not found'}")
        fake = Nvml(lib=FakeNvml([FakeGpu(processes=[(1, 2**30)]), FakeGpu(),
                                  FakeGpu(mig_mode=1, mig_children=[h100_mig_child()])]))
        t = _median_time(fake.sample, n)
        print(f"FAKE NVML (Python overhead only), 3 GPUs + 1 MIG: {t * 1e6:8.1f} us per sample")


def _train(seconds: float, monitor) -> float:
    """Tokens/s of a tiny BERT MLM for ``seconds`` (monitor sampling or None)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = BertConfig(vocab_size=2000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64)
    model = BertForMaskedLM(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(5, 2000, (16, 64), device=dev)  # (B, T)
    if monitor is not None:
        monitor.start()
    tokens, steps, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += x.numel()
        steps += 1
    if dev == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if monitor is not None:
        monitor.stop()
    return tokens / dt


def bench_training(runs: int, seconds: float, interval: float, fake: bool) -> None:
    from nbkit.gpu.nvml import Nvml
    from nbkit.gpu.widgets import GpuMonitor
    from tests.nvml_fake import FakeGpu, FakeNvml

    nv = Nvml(lib=FakeNvml([FakeGpu(), FakeGpu()])) if fake else Nvml()
    if fake:
        print("\n(sampler reads a FAKE 2-GPU NVML: measures nbkit's Python overhead, not the driver's)")
    print(f"\n== 2. training throughput, monitor every {interval:g} s vs none "
          f"(NVML {nv.state.name}; {runs} alternating pairs of {seconds:g} s)")
    _train(1.0, None)  # warm-up: imports, allocator, kernel selection
    with_m, without, duty = [], [], []
    for i in range(runs):
        without.append(_train(seconds, None))
        mon = GpuMonitor(interval=interval, nvml=nv, autostart=False)  # the widget users run
        with_m.append(_train(seconds, mon.sampler))
        duty.append(mon.sampler.busy_s / seconds)
        mon.close()
        print(f"pair {i}: without {without[-1]:10.0f} tokens/s   with {with_m[-1]:10.0f} tokens/s"
              f"   sampler+widget CPU {100 * duty[-1]:.3f} % of the run")
    a, b = statistics.median(without), statistics.median(with_m)
    spread = (max(without) - min(without)) / a
    print(f"median tokens/s without {a:.0f}, with {b:.0f}: ratio with/without {b / a:.4f} "
          f"(cost {100 * (1 - b / a):+.2f} %; run-to-run spread without monitor {100 * spread:.1f} %)")
    print(f"noise-free estimate: the sampler thread (read + widget update) used CPU for "
          f"{100 * max(duty):.3f} % of the run at most (thread_time; target < 1 %)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--fake", action="store_true", help="sample a fake 2-GPU NVML in part 2")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    args = p.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    bench_sampling(args.samples)
    bench_training(args.runs, args.seconds, args.interval, args.fake)


if __name__ == "__main__":
    main()
