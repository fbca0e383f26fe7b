"""A test double of ``pynvml`` that fakes a multi-GPU machine failing in realistic ways.

It exposes the ``pynvml`` function names :class:`nbkit.gpu.nvml.Nvml` calls and
raises the real ``pynvml.NVMLError`` subclasses with real ``NVML_ERROR_*``
codes, so the code under test cannot tell it from the driver. Used by the unit
tests and by ``bench/bench_nvml.py`` on machines without a GPU. Inject it:
``Nvml(lib=FakeNvml([...]))``. Values are in NVML's own units (bytes, mW, KB/s).

Realistic failures (gpustat-style), from what NVML does on real hardware:
``FakeGpu(fail={"nvmlDeviceGetUtilizationRates": NOT_SUPPORTED})`` (MIG
instances, some GeForce/vGPU boards), ``fail={"nvmlDeviceGetComputeRunningProcesses":
NO_PERMISSION}`` (processes of other users without root), ``init_error=
LIB_RM_VERSION_MISMATCH`` (driver upgraded, not rebooted).

Strings (name, UUID, driver version) may be ``bytes`` that are not UTF-8
(``FakeGpu(name=b"\\xfeGPU-x")``): by default the double returns them as they
are (older bindings); ``FakeNvml(strict_strings=True)`` decodes them as
nvidia-ml-py's ``convertStrBytes`` does, raising ``UnicodeDecodeError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION
NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND
DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
LIB_RM_VERSION_MISMATCH = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
GIB = 1024 ** 3


@dataclass
class FakeGpu:
    """One fake GPU; ``fail`` maps a pynvml function name to the error code it raises."""

    name: str | bytes = "NVIDIA H100 80GB HBM3"
    uuid: str | bytes | None = None             # None: "GPU-fake-NNNN"
    util: tuple[int, int] = (87, 41)            # gpu %, memory %
    mem_used: int = 20 * GIB                    # bytes
    mem_total: int = 80 * GIB
    temperature: int = 61                       # °C
    power_mw: int = 412_000
    power_limit_mw: int = 700_000
    clocks: tuple[int, int] = (1980, 2619)      # SM, memory MHz
    pcie_kb_s: tuple[int, int] = (2048, 1024)   # tx, rx
    pcie_link: tuple[int, int] = (5, 16)        # current generation, width
    cc: tuple[int, int] = (9, 0)
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, bytes)
    mig_mode: int = 0
    mig_children: list["FakeGpu"] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)


class FakeNvml:
    """A ``pynvml`` stand-in. ``init_error`` (a code) makes ``nvmlInit`` fail.

    ``calls`` counts every function call, so tests can assert laziness.
    """

    def __init__(self, gpus: list[FakeGpu] | None = None, init_error: int | None = None,
                 driver: str | bytes = "550.54.15", cuda: int = 12040, strict_strings: bool = False):
        self.gpus = list(gpus or [])
        self.strict_strings = strict_strings
        self.init_error = init_error
        self.driver = driver
        self.cuda = cuda
        self.calls: dict[str, int] = {}
        self.initialised = False

    def _call(self, fn: str, gpu: FakeGpu | None = None) -> None:
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if gpu is not None and fn in gpu.fail:
            raise pynvml.NVMLError(gpu.fail[fn])

    def _str(self, value: str | bytes) -> str | bytes:
        """A C string as the binding returns it: raw bytes, or strictly decoded like nvidia-ml-py."""
        if self.strict_strings and isinstance(value, bytes):
            return value.decode()  # raises UnicodeDecodeError on bytes that are not UTF-8, as pynvml does
        return value

    # ---- system
    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self) -> str:
        self._call("nvmlSystemGetDriverVersion")
        return self._str(self.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._call("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    # ---- devices (handles are the FakeGpu objects)
    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGpu:
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self._call("nvmlDeviceGetHandleByIndex", self.gpus[i])
        return self.gpus[i]

    def nvmlDeviceGetName(self, g: FakeGpu) -> str | bytes:
        self._call("nvmlDeviceGetName", g)
        return self._str(g.name)

    def nvmlDeviceGetUUID(self, g: FakeGpu) -> str | bytes:
        self._call("nvmlDeviceGetUUID", g)
        return self._str(g.uuid if g.uuid is not None else f"GPU-fake-{id(g) % 10000:04d}")

    def nvmlDeviceGetUtilizationRates(self, g: FakeGpu) -> Any:
        self._call("nvmlDeviceGetUtilizationRates", g)
        return SimpleNamespace(gpu=g.util[0], memory=g.util[1])

    def nvmlDeviceGetMemoryInfo(self, g: FakeGpu) -> Any:
        self._call("nvmlDeviceGetMemoryInfo", g)
        return SimpleNamespace(used=g.mem_used, total=g.mem_total, free=g.mem_total - g.mem_used)

    def nvmlDeviceGetTemperature(self, g: FakeGpu, sensor: int) -> int:
        self._call("nvmlDeviceGetTemperature", g)
        return g.temperature

    def nvmlDeviceGetPowerUsage(self, g: FakeGpu) -> int:
        self._call("nvmlDeviceGetPowerUsage", g)
        return g.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, g: FakeGpu) -> int:
        self._call("nvmlDeviceGetEnforcedPowerLimit", g)
        return g.power_limit_mw

    def nvmlDeviceGetClockInfo(self, g: FakeGpu, clock: int) -> int:
        self._call("nvmlDeviceGetClockInfo", g)
        return g.clocks[0] if clock == pynvml.NVML_CLOCK_SM else g.clocks[1]

    def nvmlDeviceGetPcieThroughput(self, g: FakeGpu, counter: int) -> int:
        self._call("nvmlDeviceGetPcieThroughput", g)
        return g.pcie_kb_s[counter]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, g: FakeGpu) -> int:
        self._call("nvmlDeviceGetCurrPcieLinkGeneration", g)
        return g.pcie_link[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, g: FakeGpu) -> int:
        self._call("nvmlDeviceGetCurrPcieLinkWidth", g)
        return g.pcie_link[1]

    def nvmlDeviceGetCudaComputeCapability(self, g: FakeGpu) -> tuple[int, int]:
        self._call("nvmlDeviceGetCudaComputeCapability", g)
        return g.cc

    def nvmlDeviceGetComputeRunningProcesses(self, g: FakeGpu) -> list[Any]:
        self._call("nvmlDeviceGetComputeRunningProcesses", g)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in g.processes]

    def nvmlDeviceGetMigMode(self, g: FakeGpu) -> list[int]:
        self._call("nvmlDeviceGetMigMode", g)
        return [g.mig_mode, g.mig_mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, g: FakeGpu) -> int:
        self._call("nvmlDeviceGetMaxMigDeviceCount", g)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, g: FakeGpu, slot: int) -> FakeGpu:
        self._call("nvmlDeviceGetMigDeviceHandleByIndex", g)
        if slot >= len(g.mig_children):
            raise pynvml.NVMLError(NOT_FOUND)  # empty slot
        return g.mig_children[slot]


def h100_mig_child() -> FakeGpu:
    """A 1g.10gb MIG instance: utilisation and clocks are not supported on MIG devices."""
    return FakeGpu(name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", mem_used=1 * GIB,
                   mem_total=10 * GIB, fail={
                       "nvmlDeviceGetUtilizationRates": NOT_SUPPORTED,
                       "nvmlDeviceGetTemperature": NOT_SUPPORTED,
                       "nvmlDeviceGetPowerUsage": NOT_SUPPORTED,
                       "nvmlDeviceGetEnforcedPowerLimit": NOT_SUPPORTED,
                       "nvmlDeviceGetPcieThroughput": NOT_SUPPORTED})
