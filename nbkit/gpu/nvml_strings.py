"""NVML's strings (device name, UUID, driver version, process names), decoded leniently.

NVML hands out C ``char`` arrays. nvidia-ml-py decodes them strictly as UTF-8
(its ``convertStrBytes`` wrapper calls ``bytes.decode()``), other bindings and
older versions return the raw bytes. One byte that is not UTF-8 must not turn a
whole sample into a ``UnicodeDecodeError``: every string nbkit reads from NVML
(or from ``/proc/<pid>/comm`` for a GPU process) goes through :func:`nvml_text`
or :func:`nvml_string`, which show each bad byte as U+FFFD.
"""
from __future__ import annotations

from typing import Any, Callable


def nvml_text(value: Any) -> str | None:
    """An NVML string as ``str``, decoded leniently; ``None`` stays ``None``.

    NVML returns C ``char`` arrays. nvidia-ml-py decodes them strictly as UTF-8
    (``convertStrBytes``), so a device name, UUID, driver version or process
    name that is not valid UTF-8 (a corrupted VBIOS string, a vGPU guest
    driver, a test double returning ``b"\\xfeGPU-x"``) would raise
    ``UnicodeDecodeError``. Here bytes are decoded as UTF-8 with each bad byte
    shown as U+FFFD, so the device still shows with its metrics.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace").rstrip("\x00")
    return str(value)


def nvml_string(fn: Callable[..., Any], *args: Any) -> str | None:
    """Call the NVML string getter ``fn(*args)`` and decode its result with :func:`nvml_text`.

    nvidia-ml-py raises ``UnicodeDecodeError`` from inside the getter when the
    bytes are not UTF-8; the error object still holds those bytes
    (``exc.object``), which are decoded leniently instead. Every other
    exception (``NVMLError``: not supported, no permission, ...) propagates, so
    callers record the reason as for any metric.
    """
    try:
        return nvml_text(fn(*args))
    except UnicodeDecodeError as exc:
        return nvml_text(exc.object)
