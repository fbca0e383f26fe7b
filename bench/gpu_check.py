#!/usr/bin/env python
"""GPU check for notebook 04: microbenchmarks, BERT-base MLM throughput and MFU.

Runs in under 8 minutes on one H100/H200 and writes to ``--out`` (default
``$OUT``, else ``runs/gpu_check/``):

- ``results.json``: every table (rewritten after each section, so a run cut
  short still leaves what it measured),
- ``summary.txt``: the headline numbers,
- ``pytest_gpu.txt``: output of ``python -m pytest -m gpu tests -q``.

Sections: environment, matmul TFLOP/s (fp32/TF32/bf16/fp16) vs datasheet
peak, SDPA backends at 128 and 512, host-to-device GB/s, BERT-base MLM
training step at sequence length 128 in bf16 (SDPA; eager and ``torch.compile``)
with tokens/s and MFU, phase split and ablations, a profile with operator
stats, the diagnosis, then the GPU-marked tests. A global time guard
(``--budget-s``) skips sections that would run late.

Every step timed is ``nbkit.train.loop.Loop.train_step``, the step ``fit()`` runs
(``nbkit.profiling.step_timing.step_loop``: the loop's fused AdamW, LR schedule,
gradient clipping, precision rule, sparse MLM head in eager mode, and the real
MLM collator on random token ids); its FLOPs are the loop's own count.

Without CUDA it degrades to a tiny model and tiny sizes (``--quick`` forces
that anywhere), so the script itself can be tested on a CPU::

    python bench/gpu_check.py --out /tmp/gc            # GPU machine
    python bench/gpu_check.py --quick --out /tmp/gc    # CPU smoke run, ~1-2 min
    python bench/gpu_check.py --sections bert_eager bert_compiled phases --no-pytest   # the loop's MFU only
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from nbkit import jsonio
from nbkit.models.flops import mfu  # noqa: E402
from nbkit.profiling import diagnosis, microbench
from nbkit.profiling import profiler as profiling
from nbkit.profiling import step_timing as stepanalysis  # noqa: E402

BERT_BASE_CHINESE_VOCAB = 21128  # vocabulary of google's bert-base-chinese


class Budget:
    """Wall-clock guard: ``fits(estimate_s)`` is False once a section would run late."""

    def __init__(self, total_s: float):
        self.start, self.total = time.monotonic(), total_s

    def left(self) -> float:
        return self.total - (time.monotonic() - self.start)

    def fits(self, estimate_s: float) -> bool:
        return self.left() >= estimate_s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "runs/gpu_check")
    ap.add_argument("--budget-s", type=float, default=450.0, help="wall-clock budget (s)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (default without CUDA)")
    ap.add_argument("--batch-size", type=int, default=256, help="BERT-base headline batch")
    ap.add_argument("--no-pytest", action="store_true")
    ap.add_argument("--sections", nargs="+", default=None, metavar="KEY",
                    help="run only these sections (e.g. bert_eager bert_compiled phases ablation_num_workers); "
                         "the others are recorded as skipped")
    args = ap.parse_args(argv)
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s)
    cuda = torch.cuda.is_available()
    quick = args.quick or not cuda
    device = torch.device("cuda" if cuda else "cpu")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 rows mean fp32; TF32 has its own row
    precision = "bf16" if cuda and torch.cuda.get_device_capability()[0] >= 8 else "fp32"
    name = microbench.device_name(device)
    res: dict = {"sections": {}, "skipped": [], "errors": {}}
    res["env"] = {"python": platform.python_version(), "torch": torch.__version__,
                  "cuda": torch.version.cuda, "device": name, "precision": precision,
                  "quick": quick, "cpu_count": os.cpu_count()}
    if cuda:
        res["env"]["capability"] = list(torch.cuda.get_device_capability())

    def save():
        jsonio.write_json(out / "results.json", res, indent=1)

    def section(key: str, estimate_s: float, fn):
        if args.sections is not None and key not in args.sections:
            res["skipped"].append(f"{key}: not in --sections")
            return None
        if not budget.fits(estimate_s):
            res["skipped"].append(f"{key}: {budget.left():.0f} s left < estimate {estimate_s:.0f} s")
            print(f"[skip] {key}", flush=True)
            return None
        t0 = time.monotonic()
        print(f"[run ] {key} ({budget.left():.0f} s left)", flush=True)
        try:
            value = fn()
            res[key] = value
        except Exception as exc:  # one broken section must not lose the others
            res["errors"][key] = "".join(traceback.format_exception(exc))[-3000:]
            print(f"[err ] {key}: {exc}", flush=True)
            value = None
        res["sections"][key] = round(time.monotonic() - t0, 1)
        save()
        return value

    # ---- microbenchmarks
    sizes = (64, 128) if quick else (1024, 2048, 4096, 8192)
    section("matmul", 5 if quick else 60, lambda: microbench.matmul_bench(sizes, device=device))
    section("sdpa", 5 if quick else 30, lambda: microbench.sdpa_bench(
        (128, 512), batch=2 if quick else 32, heads=2 if quick else 12, precision=precision,
        device=device))
    section("h2d", 2 if quick else 20, lambda: microbench.h2d_bench(8 if quick else 512, device=device))

    # ---- BERT-base MLM at sequence length 128
    seq = 128
    preset, vocab = ("tiny", 1000) if quick else ("base", BERT_BASE_CHINESE_VOCAB)
    bs = 8 if quick else args.batch_size
    make_model, how = stepanalysis.model_factory(preset, vocab, seq)
    res["model"] = {"preset": preset, "vocab_size": vocab, "seq_len": seq, "how": how}
    cfg = stepanalysis.StepConfig(batch_size=bs, seq_len=seq, precision=precision, mlm_head="masked",
                                  steps=3 if quick else 10, warmup=2 if quick else 3,
                                  compile_backend="inductor" if cuda else "eager")

    def headline(compiled: bool):
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        loop = stepanalysis.step_loop(make_model(), cfg.replace(compile=compiled), device=device)
        # warm-up includes compilation; then median of 3 runs of 10 unsynchronised steps
        row = loop_step_row(loop, warmup=3 if compiled else 2, iters=2 if quick else 10)
        del loop
        if cuda:
            torch.cuda.empty_cache()
        return row

    section("bert_eager", 10 if quick else 40, lambda: headline(False))
    if cuda:  # inductor on a CPU builds C++ for minutes: not worth it for a smoke run
        section("bert_compiled", 150, lambda: headline(True))
    else:
        res["skipped"].append("bert_compiled: no CUDA (inductor CPU build too slow for a check)")

    def phases():
        loop = stepanalysis.step_loop(make_model(), cfg, device=device)
        return stepanalysis.gpu_utilization_during(lambda: stepanalysis.measure_steps(loop, cfg))

    ph = section("phases", 10 if quick else 30, phases)
    step_row, telemetry = ph if ph else (None, None)

    small = cfg.replace(batch_size=max(bs // 2, 1), steps=3 if quick else 6)
    ablations = []
    for factor, values, est in (("precision", ("fp32", precision), 40),
                                ("attn", ("sdpa", "eager"), 30),
                                ("batch_size", (small.batch_size // 2, small.batch_size, bs), 40),
                                ("num_workers", (0, 4), 30),
                                ("mlm_head", ("all", "masked"), 30)):
        if factor == "precision" and precision == "fp32":
            continue
        base = small if factor != "batch_size" else small.replace(batch_size=bs)
        rows = section(f"ablation_{factor}", 5 if quick else est,
                       lambda f=factor, v=values, b=base: stepanalysis.ablation(
                           make_model, b, f, v, device=device))
        ablations += rows or []

    def profile():
        step = profiling.make_step_fn(stepanalysis.step_loop(make_model(), small, device=device))
        p = profiling.profile_steps(step, out / "profile", active=3, device=device, top=12)
        return {"kernel_check": vars(p.kernel_check), "stats": p.stats,
                "top_device": [vars(r) for r in p.top_device], "top_cpu": [vars(r) for r in p.top_cpu],
                "peak_memory_mib": p.peak_memory_mib, "trace": str(p.trace_path)}

    prof = section("profile", 10 if quick else 40, profile)

    def diag():
        if step_row is None:
            return None
        v = diagnosis.diagnose(step_row, (prof or {}).get("stats"), telemetry, ablations)
        return {"bound": v.bound, "evidence": v.evidence,
                "changes": [vars(c) for c in v.changes], "text": v.text()}

    section("diagnosis", 0, diag)

    def run_pytest():
        limit = max(min(150.0, budget.left() - 5), 10)
        cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "tests", "-q", "-p", "no:cacheprovider"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                                  cwd=Path(__file__).resolve().parents[1])
            text, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            text, rc = f"timed out after {limit:.0f} s\n{exc.stdout or ''}", "timeout"
        (out / "pytest_gpu.txt").write_text(text)
        return {"returncode": rc, "tail": text.strip().splitlines()[-1:] if text.strip() else []}

    if not args.no_pytest:
        section("pytest_gpu", 30, run_pytest)
    res["total_s"] = round(time.monotonic() - budget.start, 1)
    save()
    summary = render_summary(res)
    (out / "summary.txt").write_text(summary)
    print(summary)
    return 0


def loop_step_row(loop, warmup: int = 2, iters: int = 10, repeats: int = 3) -> dict:
    """Tokens/s, TFLOP/s and MFU of ``loop.train_step`` (the step ``fit()`` runs).

    ``microbench.time_fn`` of ``profiler.make_step_fn(loop)``: the median of ``repeats`` runs of
    ``iters`` unsynchronised steps after ``warmup`` (compilation lands there), in seconds per
    step. FLOPs per token are the loop's own count for one step (``train_step``'s ``flops`` /
    ``tokens``: the MLM head on the rows it ran on). ``mfu`` is None without a known peak.
    """
    import torch

    step = profiling.make_step_fn(loop)  # Loop.train_step on 4 pre-collated windows, cycled
    sec = microbench.time_fn(step, loop.device, warmup=warmup, iters=iters, repeats=repeats)
    last = step()
    tps, flops = last["tokens"] / sec, last["flops"] / last["tokens"]
    cuda = loop.device.type == "cuda"
    peak = loop.peak_tflops                                  # the loop's own MFU denominator (None off CUDA)
    first = next(iter(loop.train_data))["input_ids"]
    return {"compile": bool(loop.config.compile), "batch_size": loop.config.batch_size, "seq_len": len(first),
            "grad_accum_steps": loop.config.grad_accum_steps, "precision": loop.precision.name,
            "mlm_head": "masked" if loop.sparse_head else "all",
            "step_ms": sec * 1e3, "tokens_per_s": tps, "flops_per_token": flops,
            "achieved_tflops": tps * flops / 1e12, "peak_tflops": peak, "mfu": mfu(tps, flops, peak),
            "peak_memory_mib": torch.cuda.max_memory_allocated(loop.device) / 2 ** 20 if cuda else None}


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def render_summary(res: dict) -> str:
    """Headline lines: matmul % of peak, BERT tokens/s and MFU, verdict."""
    env = res["env"]
    lines = [f"device {env['device']}  torch {env['torch']}  precision {env['precision']}"
             f"  quick={env['quick']}  total {res.get('total_s')} s"]
    for r in res.get("matmul") or []:
        if r["status"] == "ok" and r["peak_tflops"]:
            lines.append(f"matmul n={r['n']:<5} {r['precision']:<4} {r['tflops']:8.1f} TFLOP/s"
                         f"  peak {r['peak_tflops']:.0f}  ({_fmt(r['pct_of_peak'])} %)")
        elif r["status"] == "ok":  # CPU or unknown GPU: no peak, GFLOP/s reads better
            lines.append(f"matmul n={r['n']:<5} {r['precision']:<4} {r['gflops']:8.1f} GFLOP/s  peak unknown")
    for r in res.get("sdpa") or []:
        lines.append(f"sdpa T={r['seq_len']:<4} {r['backend']:<9} {_fmt(r['ms'], '.3f')} ms "
                     f"x{_fmt(r['speedup_vs_math'], '.2f')} vs math  {r['status'][:60]}")
    for r in res.get("h2d") or []:
        lines.append(f"h2d pinned={r['pinned']!s:<5} {_fmt(r['gbps'])} GB/s  peak {_fmt(r['peak_gbps'])}"
                     f"  ({_fmt(r['pct_of_peak'])} %)  {r['status'][:50]}")
    for key in ("bert_eager", "bert_compiled"):
        r = res.get(key)
        if r:
            m = "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f} %"
            lines.append(f"{key}: Loop.train_step B={r['batch_size']} T={r['seq_len']} {r['precision']}  "
                         f"{r['tokens_per_s']:.0f} tokens/s  {r['achieved_tflops']:.1f} TFLOP/s  MFU {m}"
                         f"  step {r['step_ms']:.1f} ms  peak mem {_fmt(r['peak_memory_mib'], '.0f')} MiB")
    if res.get("diagnosis"):
        lines.append(res["diagnosis"]["text"])
    if res.get("pytest_gpu"):
        lines.append(f"pytest -m gpu: rc={res['pytest_gpu']['returncode']} {res['pytest_gpu']['tail']}")
    lines += [f"skipped {s}" for s in res["skipped"]]
    lines += [f"error in {k}" for k in res["errors"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
