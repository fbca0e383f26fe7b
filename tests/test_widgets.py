"""GpuMonitor widget state against fake NVML and the real no-GPU path."""
from __future__ import annotations

import pytest

from nbkit.gpu.nvml import HOST_PID_NOTE, Nvml
from nbkit.gpu.widgets import GpuMonitor, sparkline
from tests.nvml_fake import DRIVER_NOT_LOADED, GIB, NO_PERMISSION, NOT_SUPPORTED, FakeGpu, FakeNvml
from tests.waiting import wait_until


def _fake():
    return FakeNvml([
        FakeGpu(mem_used=40 * GIB, processes=[(2**22 + 7, 1 * GIB)]),  # a PID no /proc has
        FakeGpu(fail={"nvmlDeviceGetUtilizationRates": NOT_SUPPORTED,
                      "nvmlDeviceGetComputeRunningProcesses": NO_PERMISSION}),
    ])


def test_bars_and_text_follow_samples():
    m = GpuMonitor(nvml=Nvml(lib=_fake()), autostart=False)
    m.sampler.sample_once()
    row0, row1 = m._rows
    assert row0.util.value == 87 and row0.mem.max == 80 * 1024 and row0.mem.value == 40 * 1024
    assert "412 W" in row0.details.value and "61 °C" in row0.details.value
    assert HOST_PID_NOTE in row0.procs.value
    assert row1.util.description == "util n/a" and row1.util.value == 0
    assert "n/a (not supported)" in row1.details.value
    assert "n/a (no permission)" in row1.procs.value
    assert "sample 1" in m.header.value
    m.sampler.sample_once()
    assert "sample 2" in m.header.value and "▇▇" in row0.spark.value
    m.close()


def test_repr_is_stable():
    m = GpuMonitor(nvml=Nvml(lib=_fake()), autostart=False)
    before = repr(m)
    for _ in range(3):
        m.sampler.sample_once()
    assert repr(m) == before == "GpuMonitor(devices=2, interval=1s)"
    assert m._repr_mimebundle_()["text/plain"] == before
    m.close()


def test_a_failing_view_is_shown_in_the_header_and_repr():
    m = GpuMonitor(nvml=Nvml(lib=_fake()), autostart=False)

    def broken(sample):
        raise ValueError("comm closed")

    m.sampler.listeners.append(broken)
    with pytest.warns(RuntimeWarning, match="listener broken raised ValueError: comm closed"):
        m.sampler.sample_once()
    m.sampler.sample_once()
    assert "1 error, last: listener broken raised ValueError: comm closed" in m.header.value
    assert repr(m) == ("GpuMonitor(devices=2, interval=1s; 2 errors, last: listener broken raised "
                       "ValueError: comm closed)")
    m.close()


def test_no_gpu_shows_reason_cpu_and_ram():
    m = GpuMonitor(nvml=Nvml(lib=FakeNvml([FakeGpu()], init_error=DRIVER_NOT_LOADED)),
                   autostart=False)
    assert repr(m) == "GpuMonitor(no GPU: driver_not_loaded, interval=1s)"
    assert "modprobe" in m.reason.value and m.reason in m.children
    m.sampler.sample_once()
    assert m.ram.max > 0 and 0 < m.ram.value <= m.ram.max
    assert "CPU" in m.cpu_spark.value
    m.close()


def test_live_updates_from_thread_real_no_gpu_path():
    m = GpuMonitor(interval=0.02)  # real NVML as on this machine; autostart
    wait_until(lambda: m.sampler.count >= 3, what="three samples", poll=0.01)
    m.stop()
    assert m.sampler.count >= 3 and m.sampler.errors == 0
    assert f"sample {m.sampler.count}" in m.header.value
    if not m.state.ok:
        assert repr(m).startswith("GpuMonitor(no GPU: ")
    torch = pytest.importorskip("torch")
    assert not torch.cuda.is_initialized()
    m.close()


def test_rerunning_the_cell_does_not_pile_up_threads():
    m1 = GpuMonitor(interval=0.05, nvml=Nvml(lib=_fake()))
    m2 = GpuMonitor(interval=0.05, nvml=Nvml(lib=_fake()))
    assert m2.sampler.running and not m1.sampler.running
    m1.close()
    m2.close()
    assert not m2.sampler.running


def test_sparkline():
    assert sparkline([0, 50, 100, None]) == "▁▅█ "
    assert sparkline([200, -5]) == "█▁"


@pytest.mark.slow
def test_thread_updates_reach_the_frontend_in_a_real_kernel():
    """In the installed ipykernel (7.x here), trait updates from the sampler thread are sent
    as comm messages while another cell is still running."""
    import os

    from jupyter_client.manager import start_new_kernel

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p))
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        kc.execute_interactive("from nbkit.gpu.widgets import GpuMonitor\n"
                               "m = GpuMonitor(interval=0.1)\ndisplay(m)", timeout=60)
        updates = []

        def hook(msg):
            if msg["msg_type"] == "comm_msg" and msg["content"]["data"].get("method") == "update":
                updates.append(msg["content"]["data"]["state"])

        # the cell runs until the sampler read 6 times (every 0.1 s; later on a busy machine), not a fixed time
        kc.execute_interactive("import time\nn, t0 = m.sampler.count, time.monotonic()\n"
                               "while m.sampler.count < n + 6 and time.monotonic() - t0 < 120:\n"
                               "    time.sleep(0.02)", timeout=180, output_hook=hook)
        out = []
        reply = kc.execute_interactive(
            "import ipykernel; m.stop(); print(ipykernel.__version__, m.sampler.errors)", timeout=60,
            output_hook=lambda msg: out.append(msg["content"].get("text", "")))
        assert reply["content"]["status"] == "ok"
        print("kernel ipykernel, sampler errors:", "".join(out).strip())
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    headers = [s["value"] for s in updates if "sample " in str(s.get("value", ""))]
    assert len(headers) >= 5, updates[:3]


def test_bad_interval_is_a_config_error_without_a_half_built_widget_at_exit():
    import gc
    import sys

    from nbkit.errors import ConfigError

    def attempt():  # the traceback (and any half-built widget in it) is dropped on return
        try:
            GpuMonitor(interval=0, nvml=Nvml(lib=_fake()), autostart=False)
        except ConfigError as err:
            return str(err)

    from ipywidgets.widgets.widget import _instances

    live_before = set(_instances)  # ipywidgets keeps every built widget until exit
    seen = []
    old, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        assert "interval must be > 0" in attempt()
        gc.collect()
    finally:
        sys.unraisablehook = old
    assert [str(u.exc_value) for u in seen] == []   # no "Exception ignored in Widget.__del__"
    left = [v for k, v in _instances.items() if k not in live_before]
    assert not [v for v in left if isinstance(v, GpuMonitor)]  # nothing half-built left for exit to close
    half = GpuMonitor.__new__(GpuMonitor)  # construction failed before any attribute was set
    half.close()                           # close() copes
