"""Microbenchmarks beside the device's peak (:mod:`nbkit.models.flops`): matmul, attention, host-to-device.

Each returns plain dict rows. CUDA: ``torch.cuda.Event`` pairs around ``iters`` calls after ``warmup``,
the median of ``repeats`` batches kept; CPU: ``time.perf_counter``. Without a known peak (CPUs)
``pct_of_peak`` is None.
"""
from __future__ import annotations

import math
import statistics
import time

from nbkit.errors import ConfigError
from nbkit.models.flops import pcie_peak_gbps, peak_tflops

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
SDPA_BACKENDS = ("math", "efficient", "flash")
MIN_TIMED_FLOP = 5e8   # FLOPs per matmul timing at least (0.5 GFLOP: ~10 ms on a 2-core CPU)


def resolve_device(device=None):
    """Return a ``torch.device``: ``device`` if given, else CUDA when usable, else CPU."""
    import torch

    return torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")


def device_name(device) -> str:
    """Human-readable device name (``torch.cuda.get_device_name`` or ``"cpu"``)."""
    import torch

    device = resolve_device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def time_fn(fn, device, warmup: int = 2, iters: int = 5, repeats: int = 3) -> float:
    """Median seconds per call of ``fn()`` on ``device``. Raises ``ConfigError`` when ``iters`` or ``repeats`` < 1."""
    import torch

    if iters < 1 or repeats < 1:
        raise ConfigError("time_fn needs iters >= 1 and repeats >= 1")
    device = resolve_device(device)
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3 / iters)  # ms -> s
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            samples.append((time.perf_counter() - t0) / iters)
    return statistics.median(samples)


def _dtype_for(precision: str):
    import torch

    return {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def matmul_bench(sizes=(1024, 2048), precisions=PRECISIONS, device=None, iters: int = 5,
                 repeats: int = 3) -> list[dict]:
    """TFLOP/s of square ``(n, n) @ (n, n)`` matmuls (2 n³ FLOPs each) per precision; on CUDA this creates a context.

    ``tf32`` is fp32 with ``allow_tf32`` (CUDA only, else ``skipped``). Each timing runs at least ``iters`` and
    :data:`MIN_TIMED_FLOP` FLOPs (at most 1000 matmuls); a failing matmul gives a row whose ``status`` says why.
    Rows: ``n``, ``precision``, ``iters``, ``ms`` (per matmul), ``tflops``, ``gflops``, ``peak_tflops``,
    ``pct_of_peak`` (%), ``status``.

    Raises:
        ConfigError: an unknown precision; ``iters`` or ``repeats`` < 1; a device PyTorch cannot use.
    """
    import torch

    device = resolve_device(device)
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad:
        raise ConfigError(f"unknown precision {bad}; use some of {PRECISIONS}")
    if iters < 1 or repeats < 1:
        raise ConfigError(f"matmul_bench needs iters >= 1 and repeats >= 1, got {iters} and {repeats}")
    try:
        name = device_name(device)
    except (RuntimeError, AssertionError) as exc:   # no such CUDA device, or torch without CUDA
        raise ConfigError(f"device {str(device)!r} is not usable ({exc}); see nbkit.env.doctor.report()") from exc
    rows = []
    for precision in precisions:
        for n in sizes:
            flops = 2.0 * n ** 3
            reps = max(iters, min(1000, math.ceil(MIN_TIMED_FLOP / flops)))  # matmuls per timing
            row = {"n": n, "precision": precision, "iters": reps, "ms": None, "tflops": None, "gflops": None,
                   "peak_tflops": peak_tflops(name, precision) if device.type == "cuda" else None,
                   "pct_of_peak": None, "status": "ok"}
            if precision == "tf32" and device.type != "cuda":
                row["status"] = "skipped: TF32 is a CUDA tensor-core mode"
                rows.append(row)
                continue
            old_tf32 = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            try:
                a = torch.randn(n, n, device=device, dtype=_dtype_for(precision))  # (n, n)
                b = torch.randn(n, n, device=device, dtype=_dtype_for(precision))  # (n, n)
                seconds = time_fn(lambda: a @ b, device, iters=reps, repeats=repeats)
            except RuntimeError as exc:  # e.g. fp16 matmul missing on an old CPU build
                row["status"] = f"failed: {str(exc).splitlines()[0][:80]}"
                rows.append(row)
                continue
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old_tf32
            row.update(ms=seconds * 1e3, tflops=flops / seconds / 1e12, gflops=flops / seconds / 1e9)
            if row["peak_tflops"]:
                row["pct_of_peak"] = 100.0 * row["tflops"] / row["peak_tflops"]
            rows.append(row)
    return rows


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int) -> float:
    """Forward FLOPs of non-causal attention: ``QK^T`` and ``P V``, 2 B H T^2 D each."""
    return 4.0 * batch * heads * seq_len * seq_len * head_dim


def sdpa_bench(seq_lens=(128, 512), batch: int = 32, heads: int = 12, head_dim: int = 64, precision: str = "bf16",
               backends=SDPA_BACKENDS, device=None, iters: int = 5, repeats: int = 3) -> list[dict]:
    """Forward time of ``F.scaled_dot_product_attention`` per backend (forced with ``sdpa_kernel``) and length.

    q, k, v: ``(batch, heads, seq_len, head_dim)`` (defaults: BERT-base). A backend that cannot run gives
    PyTorch's reason in ``status``. Row keys: ``backend``, ``seq_len``, ``ms``, ``tflops``,
    ``speedup_vs_math``, ``status``.
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = resolve_device(device)
    kinds = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    dtype = _dtype_for(precision)
    rows = []
    for seq_len in seq_lens:
        q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device=device, dtype=dtype)
                   for _ in range(3))  # (B, H, T, D) each
        math_ms = None
        for backend in backends:
            row = {"backend": backend, "seq_len": seq_len, "ms": None, "tflops": None, "speedup_vs_math": None,
                   "status": "ok"}
            try:
                with sdpa_kernel([kinds[backend]]):
                    seconds = time_fn(lambda: F.scaled_dot_product_attention(q, k, v), device, iters=iters,
                                      repeats=repeats)
            except RuntimeError as exc:
                row["status"] = "unavailable: " + str(exc).strip().splitlines()[0][:100]
                rows.append(row)
                continue
            row["ms"] = seconds * 1e3
            row["tflops"] = attention_flops(batch, heads, seq_len, head_dim) / seconds / 1e12
            if backend == "math":
                math_ms = row["ms"]
            if math_ms:
                row["speedup_vs_math"] = math_ms / row["ms"]
            rows.append(row)
    return rows


def h2d_bench(size_mib: int = 256, device=None, iters: int = 5, repeats: int = 3) -> list[dict]:
    """Host-to-device copy GB/s (1e9 B/s) of a ``size_mib`` MiB buffer, pageable and pinned.

    The peak is the PCIe link NVML reports now (an idle GPU may down-train it); without one ``status`` says
    why. Row keys: ``pinned``, ``size_mib``, ``gbps``, ``peak_gbps``, ``pct_of_peak`` (%), ``status``.
    """
    import torch

    device = resolve_device(device)
    rows = []
    peak, why = None, ""
    if device.type == "cuda":
        from nbkit.gpu.nvml import Nvml

        nv = Nvml(pcie=False)
        gen, width = nv.pcie_link(device.index or 0)
        peak = pcie_peak_gbps(gen, width)
        why = (nv.why_unavailable("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetCurrPcieLinkGeneration",
                                  "nvmlDeviceGetCurrPcieLinkWidth") or f"no peak known for PCIe Gen{gen} x{width}")
        nv.shutdown()
    for pinned in (False, True):
        row = {"pinned": pinned, "size_mib": size_mib, "gbps": None, "peak_gbps": peak, "pct_of_peak": None,
               "status": "ok"}
        if device.type != "cuda":
            row["status"] = "skipped: needs a CUDA device (host-to-device copies)"
            rows.append(row)
            continue
        host = torch.empty(size_mib * 2 ** 20, dtype=torch.uint8, pin_memory=pinned)
        seconds = time_fn(lambda: host.to(device, non_blocking=True), device, iters=iters, repeats=repeats)
        row["gbps"] = host.numel() / seconds / 1e9
        if peak:
            row["pct_of_peak"] = 100.0 * row["gbps"] / peak
        else:
            row["status"] = f"ok; peak unknown ({why})"
        rows.append(row)
    return rows
