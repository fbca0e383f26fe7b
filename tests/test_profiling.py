"""Profiler wrapper: summary tables, op stats, the no-kernel-events path, a real CPU run."""
from types import SimpleNamespace

import pytest

from nbkit.errors import ConfigError
from nbkit.profiling import profiler as pf


def evt(key, count, self_cpu_us, self_dev_us=0.0, device_type="DeviceType.CPU"):
    return SimpleNamespace(key=key, count=count, self_cpu_time_total=self_cpu_us,
                           self_device_time_total=self_dev_us, cpu_time_total=self_cpu_us,
                           device_time_total=self_dev_us, device_type=device_type)


# Shaped like key_averages() of a CUDA run: CPU-side aten ops carry the device
# time of the kernels they launched; kernel events have device_type CUDA.
CUDA_RUN = [
    evt("aten::addmm", 30, 900.0, 6000.0),
    evt("aten::native_layer_norm", 12, 300.0, 800.0),
    evt("aten::add", 40, 400.0, 1200.0),
    evt("aten::_softmax", 6, 100.0, 500.0),
    evt("aten::mul_", 10, 50.0, 0.0),
    evt("aten::_foreach_addcdiv_", 2, 50.0, 0.0),
    evt("Optimizer.step#AdamW.step", 3, 2500.0, 0.0),
    evt("sm90_xmma_gemm_bf16bf16", 30, 0.0, 6000.0, "DeviceType.CUDA"),
    evt("vectorized_elementwise_kernel", 58, 0.0, 2500.0, "DeviceType.CUDA"),
]
# The same run with CUPTI restricted: no device time anywhere, no kernels.
CUPTI_BLOCKED = [evt(e.key, e.count, e.self_cpu_time_total) for e in CUDA_RUN
                 if "CPU" in e.device_type]


def test_summarize_sorts_converts_to_ms_and_truncates():
    rows = pf.summarize(CUDA_RUN, top=3, sort_by="self_device")
    assert [r.name for r in rows] == ["aten::addmm", "sm90_xmma_gemm_bf16bf16",
                                      "vectorized_elementwise_kernel"]
    assert rows[0].self_device_ms == 6.0 and rows[0].self_cpu_ms == 0.9 and rows[0].calls == 30
    by_cpu = pf.summarize(CUDA_RUN, top=2, sort_by="self_cpu")
    assert [r.name for r in by_cpu] == ["Optimizer.step#AdamW.step", "aten::addmm"]


def test_summarize_drops_zero_rows_and_rejects_bad_sort():
    assert pf.summarize(CUPTI_BLOCKED, sort_by="self_device") == []
    with pytest.raises(ConfigError, match="self_cpu"):
        pf.summarize(CUDA_RUN, sort_by="total")


def test_format_table_shows_rows_or_says_empty():
    table = pf.format_table(pf.summarize(CUDA_RUN, top=2), "top by device")
    lines = table.splitlines()
    assert lines[0] == "top by device" and "aten::addmm" in lines[2] and "6.000" in lines[2]
    assert "no operators" in pf.format_table([], "x")


def test_no_kernel_events_on_cuda_names_the_fix():
    check = pf.check_kernel_events(CUPTI_BLOCKED, "cuda")
    assert not check.ok
    assert "--cap-add SYS_ADMIN" in check.message
    assert "NVreg_RestrictProfilingToAdminUsers=0" in check.message
    logged = pf.check_kernel_events(CUPTI_BLOCKED, "cuda",
                                    "WARNING CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)")
    assert "profiler log says" in logged.message
    ok = pf.check_kernel_events(CUDA_RUN, "cuda")
    assert ok.ok and "88 kernel launches" in ok.message
    assert pf.check_kernel_events(CUPTI_BLOCKED, "cpu").ok


def test_op_stats_kernel_sizes_and_memory_share():
    stats = pf.op_stats(CUDA_RUN, active_steps=2, device_type="cuda")
    assert stats["kernels_per_step"] == 44.0
    assert stats["mean_kernel_us"] == pytest.approx(8500.0 / 88)
    # aten device time: addmm 6000, layer_norm 800, add 1200, softmax 500 -> 8500
    assert stats["memory_bound_share"] == pytest.approx(2500.0 / 8500)
    assert stats["matmul_share"] == pytest.approx(6000.0 / 8500)
    cpu = pf.op_stats(CUDA_RUN, active_steps=2, device_type="cpu")
    assert cpu["kernels_per_step"] is None
    # CPU times: addmm 900, layer_norm 300, add 400, softmax 100, mul_ 50, _foreach_addcdiv_ 50
    assert cpu["memory_bound_share"] == pytest.approx(900.0 / 1800)


def test_profile_steps_real_cpu_run(tmp_path, capfd):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = []

    def step():
        calls.append(1)
        loss = model(torch.randn(16, 32)).square().mean()  # (16, 8) -> ()
        loss.backward()
        opt.step()
        opt.zero_grad()

    # top=50 keeps every op of this tiny step: which op is slowest varies with machine load.
    res = pf.profile_steps(step, tmp_path, wait=1, warmup=1, active=2, device="cpu", top=50)
    assert len(calls) == 4
    assert res.device == "cpu" and res.active_steps == 2
    assert res.trace_path is not None and res.trace_path.stat().st_size > 0
    assert any(r.name == "aten::addmm" for r in res.top_cpu)
    assert res.top_device == [] and res.kernel_check.ok
    assert res.peak_memory_mib > 0 and res.memory_snapshot_path is None
    assert 0 < res.stats["matmul_share"] <= 1
    # Kineto's raw lines (USDT:... profiler_start / profiler_stop) never reach fd 2, i.e. a notebook cell.
    err = capfd.readouterr().err
    assert "USDT:" not in err and "profiler_start" not in err and "profiler_stop" not in err, err
    with pytest.raises(ConfigError):
        pf.profile_steps(step, tmp_path, active=0, device="cpu")


@pytest.mark.gpu
def test_profile_steps_cuda_records_kernels_or_explains(tmp_path):
    import torch

    model = torch.nn.Linear(1024, 1024).cuda()

    def step():
        model(torch.randn(256, 1024, device="cuda")).sum().backward()

    res = pf.profile_steps(step, tmp_path, active=2, device="cuda")
    assert res.memory_snapshot_path is not None and res.memory_snapshot_path.exists()
    if res.kernel_check.ok:
        assert res.top_device and res.stats["kernels_per_step"] > 0
    else:
        assert "SYS_ADMIN" in res.kernel_check.message
