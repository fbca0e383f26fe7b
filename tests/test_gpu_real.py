"""Real readings on a GPU machine (skipped without CUDA by tests/conftest.py)."""
from __future__ import annotations

import threading
import time

import pytest

from nbkit.gpu.nvml import Nvml

pytestmark = pytest.mark.gpu


def _busy(stop: threading.Event, n: int = 8192) -> None:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)  # (n, n)
    while not stop.is_set():
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)  # (n, n), bounded values
        torch.cuda.synchronize()


def test_monitor_and_report_create_no_cuda_context():
    import subprocess
    import sys
    code = ("import torch; from nbkit.gpu.nvml import Nvml, take_sample; from nbkit import env; "
            "nv = Nvml(); [take_sample(nv) for _ in range(3)]; assert nv.state.ok, nv.state; "
            "r = env.report(cuda=False); "
            "print(torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_busy_matmul_drives_utilisation_and_memory_matches_torch():
    import torch

    nv = Nvml()
    assert nv.state.ok, nv.state
    idx = torch.cuda.current_device()  # NVML index == CUDA index unless CUDA_VISIBLE_DEVICES reorders
    d0 = nv.sample()[idx]
    stop = threading.Event()
    t = threading.Thread(target=_busy, args=(stop,))
    t.start()
    try:
        time.sleep(2.0)
        utils = []
        for _ in range(5):
            utils.append(nv.sample()[idx].util_gpu_pct)
            time.sleep(0.3)
        busy = nv.sample()[idx]
        reserved_mib = torch.cuda.memory_reserved(idx) / 2**20
    finally:
        stop.set()
        t.join()
    grew = busy.mem_used_mib - d0.mem_used_mib
    # -rA shows this line for a passing test: bench/gpu_session/run.sh keeps it as the measured numbers
    print(f"GPU utilisation under a busy bf16 matmul: {utils} %; NVML memory grew {grew:.0f} MiB, "
          f"torch.cuda.memory_reserved {reserved_mib:.0f} MiB (ratio {grew / max(reserved_mib, 1):.3f})")
    assert max(u for u in utils if u is not None) >= 80, utils
    # NVML counts the CUDA context (~300-600 MiB) and other processes on top of torch's cache.
    assert reserved_mib - 64 <= grew <= reserved_mib + 1024, (grew, reserved_mib)
    assert busy.power_w and busy.power_limit_w and 0 < busy.power_w <= busy.power_limit_w * 1.1
    assert busy.sm_clock_mhz and busy.temperature_c
    procs = busy.processes or ()
    import os
    assert any(p.pid == os.getpid() for p in procs) or any(p.host_pid for p in procs)


def test_report_on_gpu_machine():
    from nbkit.env import doctor as env

    r = env.report(cuda=True)
    names = {c.name: c for c in r.checks}
    assert names["NVML"].status == "OK" and names["CUDA context"].status == "OK"
    assert any(c.layer == "gpu" for c in r.checks)
    from nbkit.profiling.microbench import matmul_bench

    m = matmul_bench((4096,), ("bf16",), device="cuda", repeats=5)[0]   # what notebook 00 shows per GPU
    assert m["status"] == "ok" and m["tflops"] > 1.0
