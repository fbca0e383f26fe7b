"""Strict JSON (RFC 8259) for every file nbkit writes: each non-finite float (NaN, ±inf) becomes ``null``,
then ``allow_nan=False`` (``jq``, ``JSON.parse`` and serde reject a bare ``NaN``). Standard library only.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from nbkit.atomic import atomic_file


def to_strict(value: Any) -> Any:
    """``value`` as plain JSON types, non-finite floats as ``None``: dicts (other keys as ``str``), sequences,
    numpy/torch numbers and arrays (``tolist()``), dataclasses, paths; anything else ``str(value)``.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int, float, bool)) or k is None else str(k): to_strict(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_strict(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_strict(dataclasses.asdict(value))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    tolist = getattr(value, "tolist", None)  # numpy scalars/arrays, torch tensors
    if callable(tolist):
        try:
            return to_strict(tolist())
        except Exception:  # noqa: BLE001  (a tensor on a lost device, ...): fall through to str
            pass
    return str(value)


def dumps(value: Any, indent: int | None = None, sort_keys: bool = False) -> str:
    """Strict JSON text of ``value`` (:func:`to_strict`), UTF-8 characters kept; ``sort_keys`` at every depth
    (a canonical text to hash)."""
    return json.dumps(to_strict(value), indent=indent, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys)


def write_json(path: str | Path, payload: Any, indent: int | None = 2) -> Any:
    """Write ``payload`` as strict, indented UTF-8 JSON through :func:`nbkit.atomic.atomic_file`; return it.
    Raises ``WriteError`` when the disk is full, over quota, read-only or not writable (the old file stays).
    """
    data = (dumps(payload, indent=indent) + "\n").encode("utf-8")
    with atomic_file(path, estimate=len(data), what="JSON file") as tmp:
        tmp.write_bytes(data)
    return payload


def _reject(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON (RFC 8259): write it as null")


def loads_strict(text: str) -> Any:
    """Parse ``text`` as a strict parser (``jq``, ``JSON.parse``) would: ``NaN``/``Infinity`` raise ValueError."""
    return json.loads(text, parse_constant=_reject)
