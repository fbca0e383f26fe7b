"""scripts/setup.sh and scripts/torch_index.sh install the right torch, as documented.

setup.sh runs on a copy of itself beside a fake ``.venv/bin/python`` that records
its arguments, so nothing is installed and no index is contacted. torch_index.sh
(the choice of index) runs with the driver mocked both ways: ``NBKIT_NVIDIA_SMI``
points at a fake ``nvidia-smi`` (or at nothing) and ``NBKIT_NVIDIA_VERSION_FILE`` at
a fake ``/proc/driver/nvidia/version``; pip's configuration is replaced by
``PIP_CONFIG_FILE=/dev/null`` plus, where a test wants one, a find-links folder
holding a tiny fake torch wheel.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_setup(tmp_path: Path, **env: str) -> list[str]:
    """The argument lists setup.sh gave to .venv/bin/python, one string per call."""
    (tmp_path / "scripts").mkdir()
    for name in ("setup.sh", "torch_index.sh"):
        shutil.copy(REPO / "scripts" / name, tmp_path / "scripts" / name)
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\n')
    fake.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in ("TORCH_SPEC", "TORCH_INDEX_URL", "NBKIT_EXTRAS")}
    clean.update(NBKIT_NVIDIA_SMI=str(tmp_path / "no-nvidia-smi"), NBKIT_NVIDIA_VERSION_FILE=str(tmp_path / "none"))
    subprocess.run(["bash", str(tmp_path / "scripts" / "setup.sh")], env={**clean, **env}, check=True, timeout=60)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert any(c.startswith("-m jupyter trust notebooks/") for c in calls), calls  # committed notebooks trusted
    return [c for c in calls if "pip install -q" in c and "--upgrade pip" not in c]


CPU = "https://download.pytorch.org/whl/cpu"


def test_default_installs_runtime_dependencies_only_and_asks_torch_index_sh(tmp_path):
    # No driver (mocked) and no local wheel (the fake python's pip finds none): the CPU build.
    assert run_setup(tmp_path) == [f"-m pip install -q --index-url {CPU} torch==2.13.0", "-m pip install -q -e ."]


def test_empty_torch_index_url_means_pips_configured_indexes(tmp_path):
    assert run_setup(tmp_path, TORCH_INDEX_URL="")[0] == "-m pip install -q torch==2.13.0"


def test_torch_index_url_applies_to_the_torch_install_only(tmp_path):
    url = "https://download.pytorch.org/whl/cpu"
    calls = run_setup(tmp_path, TORCH_INDEX_URL=url, TORCH_SPEC="torch==2.9.1")
    assert calls == [f"-m pip install -q --index-url {url} torch==2.9.1", "-m pip install -q -e ."]


def test_extras_on_request(tmp_path):
    assert run_setup(tmp_path, NBKIT_EXTRAS="test")[-1] == "-m pip install -q -e .[test]"


def test_ci_asks_for_the_test_extras_explicitly():
    assert "NBKIT_EXTRAS=test scripts/setup.sh" in (REPO / "scripts" / "test.sh").read_text()


def test_the_main_job_does_not_ask_for_the_test_extras():
    text = (REPO / "scripts" / "run_notebooks.sh").read_text()
    assert "scripts/setup.sh" in text and "NBKIT_EXTRAS" not in text


# --- scripts/torch_index.sh: the choice of index, driver mocked both ways


def fake_wheel(folder: Path, version: str = "2.13.0") -> Path:
    """A minimal valid wheel named torch (metadata only), for pip's resolver to find."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


def pick(tmp_path: Path, smi: str | None = None, version_file: str | None = None, wheels: Path | None = None,
         **env: str) -> tuple[str, str]:
    """(stdout, stderr) of torch_index.sh: ``smi`` is what the fake nvidia-smi prints (None: no nvidia-smi)."""
    smi_path = tmp_path / "nvidia-smi"
    if smi is not None:
        smi_path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{smi}\nEOF\n")
        smi_path.chmod(0o755)
    vf = tmp_path / "version"
    if version_file is not None:
        vf.write_text(version_file)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("PIP_") and k not in ("TORCH_SPEC", "TORCH_INDEX_URL", "TORCH_CUDA_BUILDS")}
    base.update(PIP_CONFIG_FILE=os.devnull, NBKIT_NVIDIA_SMI=str(smi_path), NBKIT_NVIDIA_VERSION_FILE=str(vf), **env)
    if wheels is not None:
        base["PIP_FIND_LINKS"] = str(wheels)
    res = subprocess.run(["bash", str(REPO / "scripts" / "torch_index.sh"), sys.executable], env=base,
                         capture_output=True, text=True, timeout=120, check=True)
    return res.stdout.strip(), res.stderr.strip()


SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.133.07             Driver Version: 570.133.07     CUDA Version: {cuda}     |
|-----------------------------------------+------------------------+----------------------+"""


def test_no_driver_picks_the_cpu_build_and_says_so(tmp_path):
    url, msg = pick(tmp_path)
    assert url == CPU and "no NVIDIA driver" in msg and CPU in msg


@pytest.mark.parametrize("cuda, build", [("12.8", "cu128"), ("13.1", "cu130"), ("12.7", "cu126"), ("12.6", "cu126")])
def test_a_driver_picks_the_newest_cuda_build_it_supports(tmp_path, cuda, build):
    url, msg = pick(tmp_path, smi=SMI.format(cuda=cuda))
    assert url == f"https://download.pytorch.org/whl/{build}"
    assert f"nvidia-smi reports CUDA {cuda}" in msg and f"the {build} build" in msg


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_a_driver_too_old_for_every_build_gets_the_cpu_build_and_the_fix(tmp_path):
    url, msg = pick(tmp_path, smi=SMI.format(cuda="12.2"))
    assert url == CPU and "update the NVIDIA driver" in msg
    # the list of builds is a knob
    assert pick(tmp_path, smi=SMI.format(cuda="12.4"), TORCH_CUDA_BUILDS="cu124 cu118")[0].endswith("/cu124")


def test_without_nvidia_smi_the_driver_version_file_decides(tmp_path):
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.07  Fri Feb 21 2025\nGCC version: gcc 12\n"
    url, msg = pick(tmp_path, version_file=proc)
    assert url.endswith("/cu128") and "driver 570.133.07 supports CUDA 12.8" in msg
    assert pick(tmp_path, version_file=proc.replace("570.133.07", "560.35.03"))[0].endswith("/cu126")


def test_a_local_wheel_that_pip_already_finds_wins_over_the_driver(tmp_path):
    # This project's CI: pip's find-links hold a CPU wheel of torch 2.13.0; it must be installed offline.
    wheels = tmp_path / "wheels"
    fake_wheel(wheels)
    url, msg = pick(tmp_path, smi=SMI.format(cuda="12.8"), wheels=wheels)
    assert url == "" and "local torch wheel (torch-2.13.0-py3-none-any.whl)" in msg and "offline" in msg
    fake_wheel(tmp_path / "other", "2.9.1")  # another version is no match: back to the driver's choice
    assert pick(tmp_path, smi=SMI.format(cuda="12.8"), wheels=tmp_path / "other")[0].endswith("/cu128")


def test_explicit_index_or_spec_wins(tmp_path):
    wheels = tmp_path / "wheels"
    fake_wheel(wheels)
    assert pick(tmp_path, wheels=wheels, TORCH_INDEX_URL="https://example.invalid/whl/cu126")[0] \
        == "https://example.invalid/whl/cu126"
    url, msg = pick(tmp_path, smi=SMI.format(cuda="12.8"), TORCH_SPEC="torch==2.9.1")
    assert url == "" and "TORCH_SPEC=torch==2.9.1" in msg


def test_this_machines_pip_configuration_keeps_a_local_wheel_local():
    # What scripts/test.sh does on CI: the real pip configuration, the real driver check.
    res = subprocess.run(["bash", str(REPO / "scripts" / "torch_index.sh"), sys.executable], capture_output=True,
                         text=True, timeout=120, check=True, env={k: v for k, v in os.environ.items()
                                                                  if k not in ("TORCH_SPEC", "TORCH_INDEX_URL")})
    if "local torch wheel" not in res.stderr:
        pytest.skip(f"pip's configuration here finds no local torch wheel ({res.stderr.strip()})")
    assert res.stdout.strip() == ""
