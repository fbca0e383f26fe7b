"""Strict JSON for every file nbkit writes: no ``NaN``/``Infinity``, a missing value is ``null``.

Python's ``json`` writes ``float("nan")`` as a bare ``NaN`` by default, which is
not JSON (RFC 8259): ``jq``, JavaScript's ``JSON.parse``, Go, Rust's serde and
``json.loads(..., parse_constant=...)`` reject the whole file. A held-out loss
with no scored token, an MFU without a known peak or a profiler share of an
empty phase are NaN in nbkit, so every artifact (``metrics.json``,
``stats.json``, ``training.json``, notebook 04's ``results.json``, the
``NBKIT_METRICS`` lines, ``nbkit doctor --json``) is written through
:func:`dumps` / :func:`write_json`, which first map each non-finite float to
``None`` and then encode with ``allow_nan=False``.

This module imports only the standard library (``import nbkit`` stays cheap).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any


def to_strict(value: Any) -> Any:
    """``value`` as plain JSON types, each non-finite float (NaN, ±inf) replaced by ``None``.

    Handles dicts (keys that JSON cannot take become ``str``), lists/tuples/sets,
    numpy and torch numbers and arrays (through their ``tolist()``), dataclasses
    (``dataclasses.asdict``) and paths; anything else becomes ``str(value)``, as
    ``json.dumps(..., default=str)`` did before.
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


def dumps(value: Any, indent: int | None = None) -> str:
    """Strict JSON text for ``value`` (see :func:`to_strict`); UTF-8 characters kept as they are.

    Raises:
        ValueError: never for NaN/inf (they become ``null``); only if :func:`to_strict`
            let one through, which would be a bug.
    """
    return json.dumps(to_strict(value), indent=indent, ensure_ascii=False, allow_nan=False)


def write_json(path: str | Path, payload: Any, indent: int | None = 2) -> Any:
    """Write ``payload`` as strict, indented UTF-8 JSON atomically (temp file + rename); return it.

    The file ends with a newline; the parent folder is created if missing. Written through
    :func:`nbkit.atomic.atomic_file` (fsync, rename; the temp file removed on failure).

    Raises:
        WriteError: the disk is full, over quota, read-only or not writable (path, free space
            and size needed named); the previous file at ``path`` is unchanged.
    """
    from nbkit.atomic import atomic_file

    data = (dumps(payload, indent=indent) + "\n").encode("utf-8")
    with atomic_file(path, estimate=len(data), what="JSON file") as tmp:
        tmp.write_bytes(data)
    return payload


def _reject(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON (RFC 8259): write it as null")


def loads_strict(text: str) -> Any:
    """Parse ``text`` as a strict parser (``jq``, ``JSON.parse``) would: ``NaN``/``Infinity`` raise ValueError."""
    return json.loads(text, parse_constant=_reject)
