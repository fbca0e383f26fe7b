"""NVML snapshots against a fake multi-GPU machine that fails in realistic ways."""
from __future__ import annotations

import os

import pytest

from nbkit.gpu import nvml as gpu
from nbkit.gpu.nvml import Nvml, take_sample
from tests.nvml_fake import (
    DRIVER_NOT_LOADED,
    GIB,
    LIB_RM_VERSION_MISMATCH,
    LIBRARY_NOT_FOUND,
    NO_PERMISSION,
    NOT_SUPPORTED,
    FakeGpu,
    FakeNvml,
    h100_mig_child,
)


def _machine(tmp_path):
    """GPU 0 healthy; GPU 1 no utilisation; GPU 2 no permission for processes; GPU 3 MIG."""
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "comm").write_text("python\n")
    gpus = [
        FakeGpu(processes=[(4242, 3 * GIB), (999_999, 5 * GIB)]),  # 999999: host PID
        FakeGpu(name="NVIDIA GeForce GTX 1080", fail={
            "nvmlDeviceGetUtilizationRates": NOT_SUPPORTED,
            "nvmlDeviceGetMigMode": NOT_SUPPORTED,
            "nvmlDeviceGetPcieThroughput": NOT_SUPPORTED}),
        FakeGpu(fail={"nvmlDeviceGetComputeRunningProcesses": NO_PERMISSION}),
        FakeGpu(mig_mode=1, mig_children=[h100_mig_child(), h100_mig_child()]),
    ]
    return FakeNvml(gpus), str(proc)


def test_nothing_happens_before_first_use():
    fake = FakeNvml([FakeGpu()])
    nv = Nvml(lib=fake)
    assert fake.calls == {}
    assert nv.state.ok and fake.calls["nvmlInit"] == 1
    nv.sample()
    nv.sample()
    assert fake.calls["nvmlInit"] == 1  # initialised once


def test_healthy_gpu_units(tmp_path):
    fake, proc = _machine(tmp_path)
    d = Nvml(lib=fake, proc_root=proc).sample()[0]
    assert d.util_gpu_pct == 87 and d.util_mem_pct == 41
    assert d.mem_used_mib == 20 * 1024 and d.mem_total_mib == 80 * 1024
    assert d.power_w == pytest.approx(412.0) and d.power_limit_w == pytest.approx(700.0)
    assert (d.sm_clock_mhz, d.mem_clock_mhz) == (1980, 2619)
    assert d.pcie_tx_mib_s == pytest.approx(2.0) and d.pcie_rx_mib_s == pytest.approx(1.0)
    assert d.temperature_c == 61 and d.unavailable == {}
    assert d.fmt("power_w") == "412 W"


def test_not_supported_is_na_not_zero(tmp_path):
    fake, proc = _machine(tmp_path)
    d = Nvml(lib=fake, proc_root=proc).sample()[1]
    assert d.util_gpu_pct is None and d.util_mem_pct is None
    assert d.unavailable["util_gpu_pct"] == "not supported"
    assert d.fmt("util_gpu_pct") == "n/a (not supported)"
    assert d.mem_used_mib == 20 * 1024  # the other metrics still read
    assert d.mig_mode is None and "mig_mode" not in d.unavailable


def test_processes_no_permission_and_host_pids(tmp_path):
    fake, proc = _machine(tmp_path)
    snaps = Nvml(lib=fake, proc_root=proc).sample()
    p_local, p_host = snaps[0].processes
    assert (p_local.pid, p_local.name, p_local.host_pid, p_local.used_mib) == (4242, "python", False, 3072)
    assert p_host.host_pid and p_host.name == gpu.HOST_PID_NOTE
    assert snaps[2].processes is None
    assert snaps[2].unavailable["processes"] == "no permission"


def test_mig_instances_listed_after_parent(tmp_path):
    fake, proc = _machine(tmp_path)
    snaps = Nvml(lib=fake, proc_root=proc).sample()
    assert [s.label for s in snaps] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3", "GPU 3 MIG 0", "GPU 3 MIG 1"]
    parent, child = snaps[3], snaps[4]
    assert parent.mig_mode is True and not parent.mig
    assert child.mig and child.util_gpu_pct is None and child.mem_total_mib == 10 * 1024


def test_lost_gpu_does_not_hide_the_others():
    lost = FakeGpu(fail={"nvmlDeviceGetHandleByIndex": 15})  # NVML_ERROR_GPU_IS_LOST (Xid 79)
    snaps = Nvml(lib=FakeNvml([lost, FakeGpu()])).sample()
    assert snaps[0].unavailable == {"device": "GPU lost"} and snaps[0].util_gpu_pct is None
    assert snaps[1].util_gpu_pct == 87


@pytest.mark.parametrize("code,name", [
    (LIB_RM_VERSION_MISMATCH, "version_mismatch"),
    (DRIVER_NOT_LOADED, "driver_not_loaded"),
    (LIBRARY_NOT_FOUND, "library_not_found"),
    (NO_PERMISSION, "no_permission"),
])
def test_init_failures_become_named_states(code, name):
    nv = Nvml(lib=FakeNvml([FakeGpu()], init_error=code))
    st = nv.state
    assert (st.name, st.ok) == (name, False)
    assert st.fix and st.detail and "NVML" in st.detail
    assert nv.sample() == [] and nv.device_count() == 0
    assert nv.cuda_driver_version() is None


def test_versions_and_capability():
    nv = Nvml(lib=FakeNvml([FakeGpu(cc=(8, 6))], cuda=12040))
    assert nv.cuda_driver_version() == (12, 4)
    assert nv.compute_capability(0) == (8, 6)
    assert nv.driver_version() == "550.54.15"


def test_failed_queries_keep_their_reason():
    nv = Nvml(lib=FakeNvml([FakeGpu(fail={"nvmlDeviceGetCudaComputeCapability": NOT_SUPPORTED,
                                          "nvmlDeviceGetCurrPcieLinkWidth": NO_PERMISSION})]))
    assert nv.compute_capability(0) is None and nv.pcie_link(0) == (5, None)
    assert nv.unavailable == {"nvmlDeviceGetCudaComputeCapability": "not supported",
                              "nvmlDeviceGetCurrPcieLinkWidth": "no permission"}
    assert nv.why_unavailable("nvmlDeviceGetCurrPcieLinkWidth") == "nvmlDeviceGetCurrPcieLinkWidth: no permission"
    assert nv.why_unavailable("nvmlDeviceGetName") == ""
    broken = Nvml(lib=FakeNvml([FakeGpu()], init_error=DRIVER_NOT_LOADED))
    assert broken.pcie_link(0) == (None, None) and broken.why_unavailable("x") == "NVML driver_not_loaded"


def test_a_failing_shutdown_is_warned():
    fake = FakeNvml([FakeGpu()])
    nv = Nvml(lib=fake)
    assert nv.state.ok

    def refuse():
        import pynvml
        raise pynvml.NVMLError(NO_PERMISSION)

    fake.nvmlShutdown = refuse
    with pytest.warns(RuntimeWarning, match="nvmlShutdown failed: no permission"):
        nv.shutdown()


def test_metrics_table_documents_unit_and_smi_field():
    assert gpu.METRICS["mem_used_mib"]["smi"] == "memory.used"
    assert gpu.METRICS["power_w"]["unit"] == "W"
    assert all(m["unit"] and m["smi"] and m["doc"] for m in gpu.METRICS.values())


def test_real_nvml_path_on_this_machine():
    """The real pynvml as it is here: on CI (no driver) a named state, never an exception."""
    nv = Nvml()
    s = take_sample(nv)
    if not nv.state.ok:
        assert nv.state.name in {"library_not_found", "driver_not_loaded", "no_devices",
                                 "pynvml_missing", "version_mismatch", "no_permission"}
        assert s.devices == ()
    assert s.host is not None and s.host.ram_total_mib > 0
    nv.shutdown()


def test_no_cuda_context():
    torch = pytest.importorskip("torch")
    nv = Nvml(lib=FakeNvml([FakeGpu()]))
    take_sample(nv)
    take_sample(Nvml())
    assert not torch.cuda.is_initialized()


def test_import_is_lazy():
    import subprocess
    import sys
    code = ("import sys, nbkit, nbkit.gpu.nvml, nbkit.gpu.sampler, nbkit.env.doctor, nbkit.gpu.telemetry; "
            "print('torch' in sys.modules, 'pynvml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)), check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("strict", [False, True], ids=["raw-bytes", "pynvml-decodes-strictly"])
def test_strings_that_are_not_utf8_are_decoded_leniently(tmp_path, strict):
    """C06: a device name (and UUID, driver version, process name) that is not UTF-8.

    ``strict=True`` is what nvidia-ml-py does (it raises UnicodeDecodeError inside
    the getter); ``False`` is a binding that hands back the raw bytes. Either way
    sample() does not raise and the device shows with all its metrics.
    """
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "comm").write_bytes(b"py\xffthon\n")
    fake = FakeNvml([FakeGpu(name=b"\xfeGPU-x", uuid=b"GPU-\xff00", processes=[(4242, GIB)]), FakeGpu()],
                    driver=b"550.\xfe54", strict_strings=strict)
    nv = Nvml(lib=fake, proc_root=str(proc))
    assert nv.state.ok and nv.driver_version() == "550.\ufffd54"
    sample = take_sample(nv, host=False)
    d = sample.devices[0]
    assert d.name == "\ufffdGPU-x" and d.uuid == "GPU-\ufffd00"
    assert d.util_gpu_pct == 87 and d.mem_total_mib == 80 * 1024 and d.power_w == pytest.approx(412.0)
    assert d.unavailable == {}
    assert d.processes[0].name == "py\ufffdthon"
    assert sample.devices[1].name == "NVIDIA H100 80GB HBM3"


def test_gpu_widget_and_report_show_a_device_whose_name_is_not_utf8(tmp_path):
    from nbkit import env
    from nbkit.gpu.widgets import GpuMonitor

    fake = FakeNvml([FakeGpu(name=b"\xfeGPU-x")], driver=b"\xfe", strict_strings=True)
    m = GpuMonitor(nvml=Nvml(lib=fake), autostart=False)
    m.sampler.sample_once()
    assert "\ufffdGPU-x" in m._rows[0].title.value and m._rows[0].util.value == 87
    m.close()
    rep = env.report(nvml=Nvml(lib=FakeNvml([FakeGpu(name=b"\xfeGPU-x")], strict_strings=True)))
    assert any(c.name == "GPU 0" and "\ufffdGPU-x" in c.value for c in rep.checks)
