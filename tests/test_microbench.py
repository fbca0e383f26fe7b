"""Microbenchmarks at tiny sizes on CPU; GPU-marked checks against the peak."""
import pytest

from nbkit.errors import ConfigError
from nbkit.profiling import microbench as mb


def test_time_fn_calls_warmup_plus_iters_times_repeats():
    calls = []
    seconds = mb.time_fn(lambda: calls.append(1), "cpu", warmup=2, iters=3, repeats=4)
    assert len(calls) == 2 + 3 * 4 and seconds >= 0
    with pytest.raises(ConfigError):
        mb.time_fn(lambda: None, "cpu", iters=0)


def test_matmul_rows_consistent_and_tf32_skipped_on_cpu():
    rows = mb.matmul_bench(sizes=(32, 64), precisions=("fp32", "tf32"), device="cpu",
                           iters=2, repeats=1)
    assert [(r["precision"], r["n"]) for r in rows] == [("fp32", 32), ("fp32", 64),
                                                        ("tf32", 32), ("tf32", 64)]
    for r in rows[:2]:
        assert r["status"] == "ok" and r["peak_tflops"] is None and r["pct_of_peak"] is None
        # GFLOP/s is 2 n^3 over the measured time
        assert r["gflops"] == pytest.approx(2 * r["n"] ** 3 / (r["ms"] / 1e3) / 1e9)
        assert r["tflops"] == pytest.approx(r["gflops"] / 1e3)
    assert all(r["status"].startswith("skipped") and r["ms"] is None for r in rows[2:])
    with pytest.raises(ConfigError, match="fp8"):
        mb.matmul_bench(sizes=(8,), precisions=("fp8",), device="cpu")


def test_matmul_small_sizes_time_enough_matmuls_per_timing(monkeypatch):
    """At small n one matmul is microseconds: each timing runs >= MIN_TIMED_FLOP (<= 1000 matmuls)."""
    seen = []
    real = mb.time_fn
    monkeypatch.setattr(mb, "time_fn", lambda fn, device, iters, repeats: seen.append(iters) or real(
        fn, device, iters=iters, repeats=repeats))
    rows = mb.matmul_bench(sizes=(8, 128, 1024), precisions=("fp32",), device="cpu", iters=2, repeats=1)
    assert seen == [1000, 120, 2] == [r["iters"] for r in rows]   # 5e8 / (2 * 128**3) = 119.2 -> 120
    assert all(r["status"] == "ok" and r["gflops"] > 0 for r in rows)


def test_matmul_bench_refuses_bad_counts_and_unusable_devices():
    with pytest.raises(ConfigError, match="iters >= 1"):
        mb.matmul_bench(sizes=(8,), precisions=("fp32",), device="cpu", iters=0)
    with pytest.raises(ConfigError, match="not usable.*doctor"):
        mb.matmul_bench(sizes=(8,), precisions=("fp32",), device="cuda:99")


def test_attention_flops_hand_count():
    # QK^T: 2*T*T*D per head and batch, PV the same: 4 * 2 * 3 * 5 * 5 * 7
    assert mb.attention_flops(2, 3, 5, 7) == 4 * 2 * 3 * 25 * 7


def test_sdpa_backends_on_cpu_report_reason_when_unavailable():
    rows = mb.sdpa_bench(seq_lens=(16,), batch=1, heads=2, head_dim=8, precision="fp32",
                         device="cpu", iters=2, repeats=1)
    by = {r["backend"]: r for r in rows}
    assert by["math"]["status"] == "ok" and by["math"]["speedup_vs_math"] == 1.0
    assert by["math"]["tflops"] == pytest.approx(
        mb.attention_flops(1, 2, 16, 8) / (by["math"]["ms"] / 1e3) / 1e12)
    # memory-efficient attention has no CPU kernel: a reason, not a number
    assert by["efficient"]["status"].startswith("unavailable") and by["efficient"]["ms"] is None


def test_h2d_on_cpu_says_it_needs_cuda():
    rows = mb.h2d_bench(size_mib=1, device="cpu")
    assert [r["pinned"] for r in rows] == [False, True]
    assert all(r["gbps"] is None and "CUDA" in r["status"] for r in rows)


@pytest.mark.gpu
def test_gpu_bf16_matmul_reaches_a_fair_share_of_peak():
    rows = mb.matmul_bench(sizes=(8192,), precisions=("bf16",))
    row = rows[0]
    if row["peak_tflops"] is None:
        pytest.skip(f"no peak known for {mb.device_name(None)}")
    assert row["pct_of_peak"] > 30, row


@pytest.mark.gpu
def test_gpu_pinned_copies_beat_pageable_and_flash_runs_in_bf16():
    pageable, pinned = mb.h2d_bench(size_mib=256)
    assert pinned["gbps"] > pageable["gbps"]
    rows = mb.sdpa_bench(seq_lens=(512,), precision="bf16")
    flash = next(r for r in rows if r["backend"] == "flash")
    assert flash["status"] == "ok" and flash["speedup_vs_math"] > 1
