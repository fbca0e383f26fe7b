"""Environment report: fake machines, the real no-GPU path, a broken torch, the CLI."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from nbkit.env import doctor as env
from nbkit.gpu.nvml import Nvml
from tests.nvml_fake import LIB_RM_VERSION_MISMATCH, NO_PERMISSION, FakeGpu, FakeNvml, h100_mig_child

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD_ENV = {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def _dev(tmp_path, n=1):
    d = tmp_path / "dev"
    d.mkdir()
    for i in range(n):
        (d / f"nvidia{i}").write_text("")
    return str(d)


def _by_name(r):
    return {c.name: c for c in r.checks}


def test_every_line_has_status_and_fix_when_not_ok(tmp_path):
    r = env.report(nvml=Nvml(lib=FakeNvml([FakeGpu()])), env=GOOD_ENV, dev_root=_dev(tmp_path))
    assert {c.status for c in r.checks} <= {"OK", "WARN", "FAIL"}
    assert all(c.fix for c in r.checks if c.status != "OK")
    layers = {c.layer for c in r.checks}
    assert {"os", "container", "python", "torch", "cuda", "nvml", "gpu", "jupyter", "hf"} <= layers


def test_driver_library_mismatch_fails_with_fix(tmp_path):
    r = env.report(nvml=Nvml(lib=FakeNvml([FakeGpu()], init_error=LIB_RM_VERSION_MISMATCH)),
                   env=GOOD_ENV, dev_root=_dev(tmp_path))
    line = _by_name(r)["NVML"]
    assert line.status == "FAIL" and "reboot" in line.fix
    assert not r.ok


def test_gpu_lines_from_nvml(tmp_path):
    fake = FakeNvml([FakeGpu(cc=(9, 0)), FakeGpu(name="Tesla T4", cc=(7, 5)),
                     FakeGpu(mig_mode=1, mig_children=[h100_mig_child()])])
    r = _by_name(env.report(nvml=Nvml(lib=fake), env=GOOD_ENV, dev_root=_dev(tmp_path, 3)))
    assert r["GPU 0"].status == "OK" and "sm_90" in r["GPU 0"].value and "bf16 yes" in r["GPU 0"].value
    assert r["GPU 1"].status == "WARN" and "bf16 no" in r["GPU 1"].value and "GradScaler" in r["GPU 1"].fix
    assert "MIG instance" in r["GPU 2 MIG 0"].value


def test_cpu_wheel_on_gpu_machine_fails(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("needs the CPU-only torch wheel")
    r = env.report(nvml=Nvml(lib=FakeNvml([FakeGpu()], cuda=12060)), env=GOOD_ENV,
                   dev_root=_dev(tmp_path))
    line = _by_name(r)["torch"]
    assert line.status == "FAIL" and "whl/cu126" in line.fix
    assert not torch.cuda.is_initialized()


def test_cuda_probe_fails_when_torch_cannot_see_the_gpus(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("needs a machine where torch sees no GPU")
    r = _by_name(env.report(cuda=True, nvml=Nvml(lib=FakeNvml([FakeGpu()])), env=GOOD_ENV,
                            dev_root=_dev(tmp_path)))
    assert r["CUDA context"].status == "FAIL" and "CUDA_VISIBLE_DEVICES" in r["CUDA context"].fix


def test_container_lines(tmp_path):
    e = dict(GOOD_ENV, NVIDIA_VISIBLE_DEVICES="all", NVIDIA_DRIVER_CAPABILITIES="utility")
    no_nodes = tmp_path / "empty"
    no_nodes.mkdir()
    r = _by_name(env.report(nvml=Nvml(lib=FakeNvml([])), env=e, dev_root=str(no_nodes)))
    assert r["GPU device nodes"].status == "FAIL" and "--gpus all" in r["GPU device nodes"].fix
    assert r["NVIDIA_DRIVER_CAPABILITIES"].status == "FAIL"
    assert "compute" in r["NVIDIA_DRIVER_CAPABILITIES"].fix
    assert r["TOKENIZERS_PARALLELISM"].status == "OK"
    r2 = _by_name(env.report(nvml=Nvml(lib=FakeNvml([])), env={}, dev_root=str(no_nodes)))
    assert r2["TOKENIZERS_PARALLELISM"].status == "WARN"
    assert r2["GPU device nodes"].status == "WARN"


def test_real_machine_report_no_cuda_context():
    r = env.report()
    names = _by_name(r)
    assert "NVML" in names and "torch" in names and "/dev/shm" in names
    torch = pytest.importorskip("torch")
    assert not torch.cuda.is_initialized()
    d = r.to_dict()
    assert d["counts"]["FAIL"] == sum(c["status"] == "FAIL" for c in d["checks"])
    assert "<table>" in r._repr_html_() and r.text().endswith("FAIL")


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_doctor_json_cli_exit_code():
    out = subprocess.run([sys.executable, "-m", "nbkit.cli.main", "doctor", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout)
    assert out.returncode == (0 if data["ok"] else 1)
    assert data["checks"] and all(c["status"] in ("OK", "WARN", "FAIL") for c in data["checks"])


def test_broken_torch_is_a_fail_line_not_a_crash(tmp_path):
    """C14: a ``torch/`` (and a ``pynvml.py``) on PYTHONPATH that raise: the FAIL lines name that path."""
    shadow = tmp_path / "shadow"
    broken = shadow / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        "raise OSError('libcudart.so.12: cannot open shared object file')\n")
    (shadow / "pynvml.py").write_text("raise ImportError('half-deleted pynvml')\n")
    pp = os.pathsep.join([str(shadow), ROOT])
    out = subprocess.run([sys.executable, "-m", "nbkit.cli.main", "doctor", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=pp))
    assert out.returncode == 1, out.stderr
    lines = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    torch_line, nvml_line = lines["torch"], lines["NVML"]
    assert torch_line["status"] == "FAIL" and "libcudart" in torch_line["value"]
    assert str(broken / "__init__.py") in torch_line["value"] and "PYTHONPATH" in torch_line["value"]
    assert "shadows the installed torch" in torch_line["value"]
    assert str(broken) in torch_line["fix"] and f"remove {shadow} from PYTHONPATH" in torch_line["fix"]
    assert nvml_line["status"] == "FAIL" and str(shadow / "pynvml.py") in nvml_line["value"]
    assert "shadows the installed nvidia-ml-py" in nvml_line["value"] and "half-deleted" in nvml_line["value"]


def test_import_failure_without_shadowing_says_reinstall_or_install():
    from nbkit.env.layer_checks import import_failure

    value, fix = import_failure("torch", OSError("libcudart.so.12"))  # the installed torch itself
    assert "libcudart" in value and os.path.dirname(__import__("torch").__file__) in value
    assert "shadows" not in value and "--force-reinstall torch" in fix
    value, fix = import_failure("no_such_module_xyz", ModuleNotFoundError("No module named 'no_such_module_xyz'"))
    assert "no no_such_module_xyz on sys.path" in value and "pip install no_such_module_xyz" in fix


def test_a_diagnosis_that_fails_names_its_own_failure(monkeypatch):
    from nbkit.env import layer_checks

    def crash(module):
        raise PermissionError("site-packages not readable")

    monkeypatch.setattr(layer_checks, "module_origin", crash)
    value, fix = layer_checks.import_failure("torch", OSError("libcudart.so.12"))
    assert "locating torch failed too (PermissionError: site-packages not readable)" in value
    assert "no torch on sys.path" not in value and "--force-reinstall torch" in fix


def test_unreadable_library_versions_and_capability_are_named(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")

    class BrokenCudnn:
        @staticmethod
        def getVersionInt():
            raise RuntimeError("libcudnn.so.9: undefined symbol")

    monkeypatch.setattr(torch._C, "_cudnn", BrokenCudnn, raising=False)
    fake = FakeNvml([FakeGpu(fail={"nvmlDeviceGetCudaComputeCapability": NO_PERMISSION})])
    r = _by_name(env.report(nvml=Nvml(lib=fake), env=GOOD_ENV, dev_root=_dev(tmp_path)))
    assert r["cuDNN"].status == "WARN" and "RuntimeError: libcudnn.so.9: undefined symbol" in r["cuDNN"].value
    assert r["cuDNN"].fix
    assert "sm ? (nvmlDeviceGetCudaComputeCapability: no permission)" in r["GPU 0"].value


def test_keep_busy_runs_for_the_requested_time():
    from nbkit.env.doctor import keep_busy

    r = keep_busy("cpu", seconds=0.3, n=64)
    assert r["seconds"] >= 0.3 and r["matmuls"] >= 8 and r["gflops"] > 0


@pytest.mark.parametrize("value, status", [(None, "OK"), ("smoke", "OK"), (" CPU ", "OK"), ("small", "FAIL")])
def test_nbkit_scale_is_checked(tmp_path, value, status):
    e = dict(GOOD_ENV, **({} if value is None else {"NBKIT_SCALE": value}))
    line = _by_name(env.report(nvml=Nvml(lib=FakeNvml([])), env=e, dev_root=_dev(tmp_path)))["NBKIT_SCALE"]
    assert line.status == status and line.layer == "nbkit"
    if status == "FAIL":
        assert "'small'" in line.value and "smoke, cpu, gpu" in line.fix


def test_nbkit_runs_dir_must_be_creatable(tmp_path):
    dev = _dev(tmp_path)

    def line(runs):
        e = dict(GOOD_ENV, NBKIT_RUNS_DIR=runs)
        return _by_name(env.report(nvml=Nvml(lib=FakeNvml([])), env=e, dev_root=dev))["NBKIT_RUNS_DIR"]

    assert line(str(tmp_path / "new" / "runs")).status == "OK"
    assert not (tmp_path / "new").exists(), "the check creates nothing"
    bad = line("/proc/nope/runs")
    assert bad.status == "FAIL" and "writable folder" in bad.fix


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_doctor_cli_fails_on_a_bad_scale():
    out = subprocess.run([sys.executable, "-m", "nbkit.cli.main", "doctor"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, NBKIT_SCALE="small"))
    assert out.returncode == 1 and re.search(r"FAIL\s+NBKIT_SCALE\s+'small'", out.stdout), out.stdout
