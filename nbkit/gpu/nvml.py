"""NVML snapshots of every GPU, one metric queried at a time; never a CUDA context.

Each :class:`DeviceSnapshot` metric carries its unit and ``nvidia-smi --query-gpu`` field (:data:`METRICS`);
one the driver cannot give is ``None`` with its reason in ``unavailable``, shown as "n/a", never as 0.
"""
from __future__ import annotations

import os
import threading
import time
import warnings
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from nbkit.gpu import nvml_state
from nbkit.gpu.nvml_state import NvmlState

MIB = 1024 * 1024
HOST_PID_NOTE = "host PID (container without --pid=host)"


def _m(unit: str, smi: str, doc: str) -> Any:
    return field(default=None, metadata={"unit": unit, "smi": smi, "doc": doc})


@dataclass(frozen=True)
class ProcessInfo:
    """A compute process (``nvidia-smi --query-compute-apps=pid,used_memory``); ``used_mib`` None when hidden;
    ``host_pid``: the PID is outside this PID namespace (a container without ``--pid=host``), ``name`` then
    :data:`HOST_PID_NOTE`.
    """

    pid: int
    used_mib: float | None
    name: str
    host_pid: bool


@dataclass(frozen=True)
class DeviceSnapshot:
    """One reading of one GPU or MIG instance. ``None`` = not available (see ``unavailable``)."""

    index: int                      # NVML index ("index"); MIG: parent index
    name: str                       # "name"
    uuid: str | None = None         # "uuid"
    mig: bool = False               # True for a MIG instance (listed after its parent)
    mig_index: int | None = None    # slot of the MIG instance on its parent
    mig_mode: bool | None = None    # "mig.mode.current" (parents only)
    util_gpu_pct: float | None = _m("%", "utilization.gpu",
                                    "time a kernel ran over the last sample period (1/6 s to 1 s)")
    util_mem_pct: float | None = _m("%", "utilization.memory", "time device memory was read or written")
    mem_used_mib: float | None = _m("MiB", "memory.used", "device memory allocated by all contexts")
    mem_total_mib: float | None = _m("MiB", "memory.total", "installed device memory")
    temperature_c: float | None = _m("°C", "temperature.gpu", "core GPU temperature")
    power_w: float | None = _m("W", "power.draw", "board power draw (NVML reports mW)")
    power_limit_w: float | None = _m("W", "enforced.power.limit", "enforced power limit")
    sm_clock_mhz: float | None = _m("MHz", "clocks.sm", "current SM clock")
    mem_clock_mhz: float | None = _m("MHz", "clocks.mem", "current memory clock")
    pcie_tx_mib_s: float | None = _m("MiB/s", "(nvidia-smi dmon -s t)",
                                     "PCIe TX over a 20 ms window (NVML reports KB/s)")
    pcie_rx_mib_s: float | None = _m("MiB/s", "(nvidia-smi dmon -s t)",
                                     "PCIe RX over a 20 ms window (NVML reports KB/s)")
    processes: tuple[ProcessInfo, ...] | None = None   # None = could not list (see unavailable)
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> reason

    @property
    def label(self) -> str:
        """``GPU 0`` or ``GPU 0 MIG 1``."""
        return f"GPU {self.index}" + (f" MIG {self.mig_index}" if self.mig else "")

    def fmt(self, metric: str, digits: int = 0) -> str:
        """``"87 %"`` or ``"n/a (not supported)"`` for one metric name."""
        value = getattr(self, metric)
        if value is None:
            reason = self.unavailable.get(metric)
            return f"n/a ({reason})" if reason else "n/a"
        return f"{value:.{digits}f} {METRICS[metric]['unit']}"


#: metric name -> {"unit", "smi", "doc"}: the documentation table of every number.
METRICS: dict[str, dict[str, str]] = {f.name: dict(f.metadata) for f in fields(DeviceSnapshot) if f.metadata}


@dataclass(frozen=True)
class HostSnapshot:
    """CPU and RAM of this machine (psutil): ``cpu_pct`` in %, RAM in MiB."""

    cpu_pct: float
    ram_used_mib: float
    ram_total_mib: float


@dataclass(frozen=True)
class Sample:
    """Everything one sampler tick reads. ``time_s`` is ``time.monotonic()``."""

    time_s: float
    wall_time: float                 # time.time(), for display only
    devices: tuple[DeviceSnapshot, ...]
    host: HostSnapshot | None
    state: NvmlState


def _process_name(pid: int, proc_root: str) -> str:
    # /proc/<pid>/comm is whatever bytes the process set (prctl PR_SET_NAME): decode leniently
    try:
        with open(os.path.join(proc_root, str(pid), "comm"), "rb") as f:
            return nvml_text(f.read()).strip() or "?"
    except OSError:
        return "?"


class Nvml:
    """Lazy, failure-tolerant NVML: nothing happens at construction, :meth:`init` never raises. ``lib``: the ``pynvml``
    module (``nvidia-ml-py``) or a test double, imported on first use by default; ``proc_root``: where PIDs are looked
    up; ``pcie``: read PCIe throughput (a 20 ms window per direction per read).
    """

    def __init__(self, lib: Any = None, proc_root: str = "/proc", pcie: bool = True):
        self._lib = lib
        self.proc_root = proc_root
        self.pcie = pcie
        self._state: NvmlState | None = None
        self._lock = threading.Lock()
        self._count = 0
        self.unavailable: dict[str, str] = {}   # NVML function -> reason of its last failure ("not supported")

    # ---- lifecycle
    def init(self) -> NvmlState:
        """Initialise NVML once; return the :class:`NvmlState` (``ok`` or the named failure with its fix)."""
        with self._lock:
            if self._state is not None:
                return self._state
            if self._lib is None:
                try:
                    import pynvml
                except Exception as exc:  # ImportError, or a broken install
                    self._state = nvml_state.pynvml_missing(exc)
                    return self._state
                self._lib = pynvml
            try:
                self._lib.nvmlInit()
                self._count = int(self._lib.nvmlDeviceGetCount())
            except Exception as exc:
                self._state = nvml_state.state_from_error(exc)
                return self._state
            self._state = nvml_state.ok_state(self._count, self.driver_version())
            return self._state

    @property
    def state(self) -> NvmlState:
        """Current state (initialises on first access)."""
        return self.init()

    def shutdown(self) -> None:
        """``nvmlShutdown`` if initialised; safe to call twice."""
        with self._lock:
            if self._state is not None and self._state.name in ("ok", "no_devices"):
                try:
                    self._lib.nvmlShutdown()
                except Exception as exc:  # nothing to undo, but say so
                    warnings.warn(f"nvmlShutdown failed: {nvml_state.metric_reason(exc)} ({exc})",
                                  RuntimeWarning, stacklevel=2)
            self._state = None

    def device_count(self) -> int:
        """Number of physical GPUs NVML sees (0 when NVML fails)."""
        return self._count if self.init().name == "ok" else 0

    # ---- system
    def _get(self, fn: str, *args: Any) -> Any:
        """``lib.fn(*args)``, or None with the reason in :attr:`unavailable`."""
        try:
            return getattr(self._lib, fn)(*args)
        except Exception as exc:
            self.unavailable[fn] = nvml_state.metric_reason(exc)
            return None

    def driver_version(self) -> str | None:
        """Driver version string, e.g. ``"550.54.15"`` (``nvidia-smi --query-gpu=driver_version``)."""
        try:
            return nvml_string(self._lib.nvmlSystemGetDriverVersion)
        except Exception as exc:
            self.unavailable["nvmlSystemGetDriverVersion"] = nvml_state.metric_reason(exc)
            return None

    def cuda_driver_version(self) -> tuple[int, int] | None:
        """Highest CUDA version the driver supports, e.g. ``(12, 4)`` (NVML encodes 12040)."""
        if not self.init().ok:
            return None
        v = self._get("nvmlSystemGetCudaDriverVersion")
        return None if v is None else (int(v) // 1000, (int(v) % 1000) // 10)

    def compute_capability(self, index: int) -> tuple[int, int] | None:
        """(major, minor) of GPU ``index`` from NVML, without a CUDA context."""
        if not self.init().ok:
            return None
        h = self._get("nvmlDeviceGetHandleByIndex", index)
        cc = self._get("nvmlDeviceGetCudaComputeCapability", h) if h is not None else None
        return None if cc is None else (int(cc[0]), int(cc[1]))

    def pcie_link(self, index: int) -> tuple[int | None, int | None]:
        """Current PCIe (generation, width) of GPU ``index`` (``pcie.link.gen.current``, ``pcie.link.width.current``);
        None where NVML cannot say (reason in :attr:`unavailable`).
        """
        if not self.init().ok:
            return None, None
        h = self._get("nvmlDeviceGetHandleByIndex", index)
        if h is None:
            return None, None
        gen = self._get("nvmlDeviceGetCurrPcieLinkGeneration", h)
        width = self._get("nvmlDeviceGetCurrPcieLinkWidth", h)
        return (None if gen is None else int(gen)), (None if width is None else int(width))

    def why_unavailable(self, *functions: str) -> str:
        """``"fn: not supported"`` for each of ``functions`` that failed, ``"NVML <state>"`` when NVML is not usable."""
        if not self.init().ok:
            return f"NVML {self.init().name}"
        return "; ".join(f"{fn}: {self.unavailable[fn]}" for fn in functions if fn in self.unavailable)

    # ---- sampling
    def sample(self) -> list[DeviceSnapshot]:
        """One snapshot per GPU, each MIG instance after its parent; [] when NVML is not usable. Never raises."""
        if not self.init().ok:
            return []
        out: list[DeviceSnapshot] = []
        for i in range(self._count):
            try:
                handle = self._lib.nvmlDeviceGetHandleByIndex(i)
            except Exception as exc:
                out.append(DeviceSnapshot(index=i, name="?", unavailable={"device": nvml_state.metric_reason(exc)}))
                continue
            out.append(self._snapshot(handle, i))
            if out[-1].mig_mode:
                for slot in range(int(self._get("nvmlDeviceGetMaxMigDeviceCount", handle) or 0)):
                    h = self._get("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
                    if h is not None:  # empty slots raise NVML_ERROR_NOT_FOUND
                        out.append(self._snapshot(h, i, mig_index=slot))
        return out

    def _snapshot(self, h: Any, index: int, mig_index: int | None = None) -> DeviceSnapshot:
        lib, why = self._lib, {}

        def q(metric: str, fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except Exception as exc:
                why[metric] = nvml_state.metric_reason(exc)
                return None

        name = q("name", lambda: nvml_string(lib.nvmlDeviceGetName, h)) or "?"
        uuid = q("uuid", lambda: nvml_string(lib.nvmlDeviceGetUUID, h))
        vals: dict[str, Any] = {}
        util = q("util_gpu_pct", lambda: lib.nvmlDeviceGetUtilizationRates(h))
        if util is not None:
            vals["util_gpu_pct"], vals["util_mem_pct"] = float(util.gpu), float(util.memory)
        elif "util_gpu_pct" in why:
            why["util_mem_pct"] = why["util_gpu_pct"]
        mem = q("mem_used_mib", lambda: lib.nvmlDeviceGetMemoryInfo(h))
        if mem is not None:
            vals["mem_used_mib"], vals["mem_total_mib"] = mem.used / MIB, mem.total / MIB
        elif "mem_used_mib" in why:
            why["mem_total_mib"] = why["mem_used_mib"]
        vals["temperature_c"] = q("temperature_c", lambda: float(lib.nvmlDeviceGetTemperature(h, 0)))  # 0: GPU die
        vals["power_w"] = q("power_w", lambda: lib.nvmlDeviceGetPowerUsage(h) / 1000.0)
        vals["power_limit_w"] = q("power_limit_w", lambda: lib.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0)
        vals["sm_clock_mhz"] = q("sm_clock_mhz", lambda: float(lib.nvmlDeviceGetClockInfo(h, 1)))
        vals["mem_clock_mhz"] = q("mem_clock_mhz", lambda: float(lib.nvmlDeviceGetClockInfo(h, 2)))
        if self.pcie:  # NVML_PCIE_UTIL_TX_BYTES = 0, RX = 1; KB/s -> MiB/s
            vals["pcie_tx_mib_s"] = q("pcie_tx_mib_s", lambda: lib.nvmlDeviceGetPcieThroughput(h, 0) / 1024.0)
            vals["pcie_rx_mib_s"] = q("pcie_rx_mib_s", lambda: lib.nvmlDeviceGetPcieThroughput(h, 1) / 1024.0)
        mig_mode = None
        if mig_index is None:
            mode = q("mig_mode", lambda: lib.nvmlDeviceGetMigMode(h))
            why.pop("mig_mode", None)  # pre-Ampere GPUs: not supported = no MIG
            mig_mode = None if mode is None else bool(mode[0])
        procs = q("processes", lambda: self._processes(lib.nvmlDeviceGetComputeRunningProcesses(h)))
        return DeviceSnapshot(index=index, name=name, uuid=uuid, mig=mig_index is not None, mig_index=mig_index,
                              mig_mode=mig_mode, processes=procs, unavailable=why, **vals)

    def _processes(self, raw: Any) -> tuple[ProcessInfo, ...]:
        out = []
        for p in raw:
            used = getattr(p, "usedGpuMemory", None)
            visible = os.path.exists(os.path.join(self.proc_root, str(p.pid)))   # in this PID namespace
            out.append(ProcessInfo(int(p.pid), None if used is None else used / MIB,
                                   _process_name(p.pid, self.proc_root) if visible else HOST_PID_NOTE, not visible))
        return tuple(out)


def host_snapshot() -> HostSnapshot | None:
    """CPU % since the previous call and RAM used/total in MiB (psutil; None if missing)."""
    try:
        import psutil
    except ImportError:
        return None
    vm = psutil.virtual_memory()
    return HostSnapshot(psutil.cpu_percent(interval=None), (vm.total - vm.available) / MIB, vm.total / MIB)


def take_sample(nvml: Nvml, host: bool = True) -> Sample:
    """Read every GPU (and the host) once; never raises, never creates a CUDA context."""
    devices = tuple(nvml.sample())
    return Sample(time.monotonic(), time.time(), devices, host_snapshot() if host else None, nvml.state)


def nvml_text(value: Any) -> str | None:
    """An NVML string (``bytes`` or ``str``) as ``str``, bad UTF-8 bytes as U+FFFD (a corrupted VBIOS name must
    not hide the device); ``None`` stays ``None``.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace").rstrip("\x00")
    return str(value)


def nvml_string(fn: Callable[..., Any], *args: Any) -> str | None:
    """``nvml_text(fn(*args))``; the bytes of nvidia-ml-py's own ``UnicodeDecodeError`` are decoded leniently too.
    Other errors (``NVMLError``) propagate, for the caller to record.
    """
    try:
        return nvml_text(fn(*args))
    except UnicodeDecodeError as exc:
        return nvml_text(exc.object)
