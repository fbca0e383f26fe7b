"""Telemetry callback driven by a fake loop; input-bound advice on realistic traces."""
from __future__ import annotations

import time
from types import SimpleNamespace

from nbkit.gpu.nvml import DeviceSnapshot, HostSnapshot, Nvml, Sample
from nbkit.gpu.nvml_state import ok_state
from nbkit.gpu.sampler import Sampler
from nbkit.gpu.telemetry import TelemetryCallback, input_bound_advice, sample_row
from tests.nvml_fake import GIB, FakeGpu, FakeNvml
from tests.waiting import wait_until


def _sample(t, util, used_mib, total_mib=80 * 1024):
    d = DeviceSnapshot(index=0, name="fake", util_gpu_pct=util, mem_used_mib=used_mib,
                       mem_total_mib=total_mib)
    return Sample(t, t, (d,), HostSnapshot(50.0, 1000.0, 8000.0), ok_state(1, "x"))


def test_advice_when_starved_with_memory_to_spare():
    trace = [_sample(t, 20 + (t % 3), 8 * 1024) for t in range(30)]
    msg = input_bound_advice(trace)
    assert msg and "input-bound" in msg and "num_workers" in msg and "pin_memory" in msg
    assert "median 21 %" in msg


def test_no_advice_when_busy_or_memory_full_or_no_gpu():
    assert input_bound_advice([_sample(t, 95, 8 * 1024) for t in range(30)]) is None
    assert input_bound_advice([_sample(t, 20, 78 * 1024) for t in range(30)]) is None
    assert input_bound_advice([_sample(t, None, None, None) for t in range(30)]) is None
    assert input_bound_advice([_sample(t, 20, 1024) for t in range(3)]) is None  # too few


def test_warmup_is_ignored():
    # 40 % of samples idle during model load, then busy: not input-bound
    trace = [_sample(t, 0 if t < 8 else 97, 8 * 1024) for t in range(20)]
    assert input_bound_advice(trace) is None


def test_callback_records_on_the_loop_time_axis(capsys):
    fake = FakeNvml([FakeGpu(util=(12, 3), mem_used=2 * GIB)])
    nv = Nvml(lib=fake)
    from nbkit.gpu.nvml import take_sample
    sampler = Sampler(lambda: take_sample(nv), interval=0.01)
    cb = TelemetryCallback(sampler)
    loop = SimpleNamespace(config=None, state=SimpleNamespace(step=0), device="cuda")
    t0 = time.monotonic()
    cb.on_train_begin(loop)
    assert sampler.running
    for step in range(1, 6):
        n = len(cb.rows)
        wait_until(lambda n=n: len(cb.rows) > n, what="a telemetry row")   # a sample between two logs
        cb.on_log(loop, {"step": step, "loss": 5.0 / step, "tokens_per_s": 1000.0})
    cb.on_evaluate(loop, {"eval_loss": 2.0})
    cb.on_train_end(loop, None)
    spent = time.monotonic() - t0
    assert not sampler.running and cb._on_sample not in sampler.listeners
    assert len(cb.rows) >= 5
    times = [r["elapsed_s"] for r in cb.rows]
    assert times == sorted(times) and 0 <= times[0] <= times[-1] <= spent   # seconds since on_train_begin
    assert cb.logs[-1]["elapsed_s"] >= times[0]
    assert cb.rows[-1]["util_pct"] == 12 and cb.rows[-1]["mem_total_mib"] == 80 * 1024
    assert cb.advice and "input-bound" in cb.advice
    assert "input-bound" in capsys.readouterr().out
    fig = cb.plot()
    assert len(fig.axes) == 3
    sampler.close()


def test_running_monitor_is_left_running():
    sampler = Sampler(lambda: _sample(time.monotonic(), 90, 1024), interval=0.01).start()
    cb = TelemetryCallback(SimpleNamespace(sampler=sampler), verbose=False)
    cb.on_train_begin(None)
    wait_until(lambda: cb.rows, what="a telemetry row")
    cb.on_train_end(None, None)
    assert sampler.running and cb.rows and cb.advice is None
    sampler.close()


def test_sample_row_skips_mig_and_missing():
    s = _sample(10.0, None, None, None)
    r = sample_row(s, 4.0)
    assert r["elapsed_s"] == 6.0 and r["util_pct"] is None and r["cpu_pct"] == 50.0


def test_monitor_telemetry_shortcut():
    from nbkit.gpu.widgets import GpuMonitor

    m = GpuMonitor(interval=0.01, nvml=Nvml(lib=FakeNvml([FakeGpu()])), autostart=False)
    cb = m.telemetry(verbose=False)
    cb.on_train_begin(None)
    wait_until(lambda: len(cb.rows) >= 2, what="two telemetry rows")
    cb.on_train_end(None, None)
    assert cb.sampler is m.sampler and len(cb.rows) >= 2 and not m.sampler.running
    m.close()
