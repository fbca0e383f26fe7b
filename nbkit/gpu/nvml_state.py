"""NVML failures (``pynvml.NVMLError`` with an ``NVML_ERROR_*`` code, ``nvmlReturn_t``) as named states with a fix.

Imports nothing heavy: only the error's ``value`` is read, so it works when ``pynvml`` itself is broken.
"""
from __future__ import annotations

from dataclasses import dataclass

# NVML_ERROR_* codes (pynvml.py / nvml.h), repeated so that mapping works when ``pynvml`` cannot be imported
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
TIMEOUT = 10
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
LIB_RM_VERSION_MISMATCH = 18


@dataclass(frozen=True)
class NvmlState:
    """Where NVML stands. ``name`` (stable, tests and JSON key on it): ``ok``, ``pynvml_missing``,
    ``library_not_found``, ``driver_not_loaded``, ``version_mismatch``, ``no_permission``, ``no_devices``,
    ``gpu_lost`` or ``error``; ``ok``: devices can be sampled; ``detail``: what happened (NVML's message
    included); ``fix``: one line ("" when ok).
    """

    name: str
    ok: bool
    detail: str
    fix: str


# code -> (name, explanation, fix)
_INIT_FAILURES: dict[int, tuple[str, str, str]] = {
    LIBRARY_NOT_FOUND: ("library_not_found",
                        "libnvidia-ml.so is not on this machine (no NVIDIA driver, or a container started without "
                        "GPU access).",
                        "on a GPU host start the container with `--gpus all` (NVIDIA Container Toolkit) or install "
                        "the NVIDIA driver; on a CPU-only machine nothing to do."),
    DRIVER_NOT_LOADED: ("driver_not_loaded", "the NVIDIA kernel module is not loaded.",
                        "load it (`sudo modprobe nvidia`) or reboot after installing the driver; check "
                        "`dmesg | grep -i nvidia`."),
    LIB_RM_VERSION_MISMATCH: ("version_mismatch",
                              "the user-space NVML library and the loaded kernel driver have different versions "
                              "(typical after a driver upgrade without reboot).",
                              "reboot the host (or reload the nvidia kernel modules); in a container, recreate it "
                              "so the toolkit mounts the host's matching libnvidia-ml."),
    NO_PERMISSION: ("no_permission", "this user may not open the GPU device nodes.",
                    "add the user to the group owning /dev/nvidia* (often `video`) or run the container with "
                    "`--gpus all`."),
    GPU_IS_LOST: ("gpu_lost", "a GPU fell off the bus or stopped responding.",
                  "check `dmesg` for Xid errors; reset the GPU (`nvidia-smi -r`) or reboot."),
    FUNCTION_NOT_FOUND: ("version_mismatch", "the NVML library is older than nvidia-ml-py expects.",
                         "update the NVIDIA driver, or pin an older `nvidia-ml-py`."),
}


def ok_state(device_count: int, driver: str | None) -> NvmlState:
    """The healthy state (or ``no_devices`` when NVML works but lists no GPU)."""
    if device_count == 0:
        return NvmlState("no_devices", False, f"NVML works (driver {driver}) but sees no GPU.",
                         "check NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES and `--gpus all`.")
    return NvmlState("ok", True, f"{device_count} GPU(s), driver {driver}.", "")


def pynvml_missing(exc: BaseException) -> NvmlState:
    """State for ``import pynvml`` failing (package not installed or broken)."""
    return NvmlState("pynvml_missing", False, f"`import pynvml` failed: {exc!r}.",
                     "`pip install nvidia-ml-py` (and `pip uninstall pynvml`, the deprecated wrapper).")


def state_from_error(exc: BaseException) -> NvmlState:
    """The state for an exception of ``nvmlInit``/``nvmlDeviceGetCount``: its ``value`` code picks it, anything
    else is ``error``. Never raises.
    """
    code = getattr(exc, "value", None)
    if code in _INIT_FAILURES:
        name, why, fix = _INIT_FAILURES[code]
        return NvmlState(name, False, f"{why} (NVML: {exc})", fix)
    return NvmlState("error", False, f"NVML failed: {type(exc).__name__}: {exc}",
                     "run `nvidia-smi`; if it fails too, reinstall the driver or restart the container.")


def metric_reason(exc: BaseException) -> str:
    """Short reason a single metric is unavailable: ``not supported``, ``no permission``, ..."""
    code = getattr(exc, "value", None)
    return {NOT_SUPPORTED: "not supported", NO_PERMISSION: "no permission", NOT_FOUND: "not found",
            TIMEOUT: "timeout", GPU_IS_LOST: "GPU lost", FUNCTION_NOT_FOUND: "driver too old",
            }.get(code, f"error {code if code is not None else type(exc).__name__}")
