"""The store's shard files, written part by part: temp names, fsync, rename, then the part's sorted hashes and
last its done-marker (``part-k.done.json``); a rerun trusts only parts whose marker and files check out. A full
disk (``ENOSPC``) removes the part's temp files first.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from nbkit import jsonio
from nbkit.atomic import fsync_dir
from nbkit.errors import CheckpointError, DataError

SPLITS = ("train", "validation")


def _write(fh, data: bytes) -> None:
    """All shard bytes go through here (tests replace it to simulate a full disk)."""
    fh.write(data)


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


class DiskFull(Exception):
    """Internal: ENOSPC while writing; converted by the caller, which knows the space still needed."""


class ShardFile:
    """One split's ``.ids`` + ``.wst`` of one part (``name``: ``"train-00003"``), appended, committed atomically."""

    def __init__(self, shard_dir: Path, name: str):
        self.dir, self.name = shard_dir, name
        self.n_tokens = self.n_docs = 0
        self.max_id = -1   # the largest id appended: checked against the vocabulary before the store is complete
        self._fh: dict[str, Any] = {}
        self._sha = {ext: hashlib.sha256() for ext in ("ids", "wst")}

    def _tmp(self, ext: str) -> Path:
        return self.dir / f".{self.name}.{ext}.tmp"

    def append(self, ids: np.ndarray, wst: np.ndarray, n_docs: int) -> None:
        """Append ``ids`` (the store's dtype, little-endian) and ``wst`` (uint8, same length)."""
        if not len(ids):
            return
        try:
            for ext, arr in (("ids", ids), ("wst", wst)):
                if ext not in self._fh:
                    self._fh[ext] = open(self._tmp(ext), "wb")
                data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
                self._sha[ext].update(data)
                _write(self._fh[ext], data)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self.abort()
                raise DiskFull(str(exc)) from exc
            raise
        self.n_tokens += len(ids)
        self.n_docs += n_docs
        self.max_id = max(self.max_id, int(ids.max()))

    def commit(self) -> dict[str, Any] | None:
        """Flush, fsync and rename; the marker entry (``name``, ``n_tokens``, ``n_docs``, ``max_id``, each file's
        ``sha256``), None when empty."""
        if not self.n_tokens:
            self.abort()
            return None
        try:
            for ext, fh in self._fh.items():
                fh.flush()
                os.fsync(fh.fileno())
                fh.close()
                os.replace(self._tmp(ext), self.dir / f"{self.name}.{ext}")
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                self.abort()
                raise DiskFull(str(exc)) from exc
            raise
        return {"name": self.name, "n_tokens": self.n_tokens, "n_docs": self.n_docs, "max_id": self.max_id,
                "sha256": {ext: h.hexdigest() for ext, h in self._sha.items()}}

    def abort(self) -> None:
        """Close and delete the temp files (nothing of this shard stays)."""
        for ext, fh in self._fh.items():
            fh.close()
            self._tmp(ext).unlink(missing_ok=True)
        self._fh.clear()


def part_name(k: int) -> str:
    return f"part-{k:05d}"


def write_marker(shard_dir: Path, k: int, hashes: np.ndarray, marker: dict[str, Any]) -> None:
    """Write ``part-k.hashes`` (sorted uint64) and then ``part-k.done.json``: the part is complete."""
    base = shard_dir / part_name(k)
    tmp = shard_dir / f".{part_name(k)}.hashes.tmp"
    try:
        with open(tmp, "wb") as fh:
            _write(fh, np.sort(hashes).astype("<u8").tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, f"{base}.hashes")
        fsync_dir(shard_dir)
        jsonio.write_json(f"{base}.done.json", marker)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise DiskFull(str(exc)) from exc
        raise


def _intact(shard_dir: Path, marker: dict[str, Any], itemsize: int) -> bool:
    for entry in marker["shards"].values():
        if entry is None:
            continue
        for ext, size in (("ids", entry["n_tokens"] * itemsize), ("wst", entry["n_tokens"])):
            p = shard_dir / f"{entry['name']}.{ext}"
            if not p.is_file() or p.stat().st_size != size:
                return False
    return (shard_dir / f"{part_name(marker['part'])}.hashes").is_file()


def completed_parts(shard_dir: Path, itemsize: int) -> list[dict[str, Any]]:
    """Done-markers of the complete parts ``0..k`` in order; every file of a later part is deleted."""
    done: list[dict[str, Any]] = []
    if not shard_dir.is_dir():
        return done
    while True:
        path = shard_dir / f"{part_name(len(done))}.done.json"
        try:
            marker = jsonio.loads_strict(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            break
        if not _intact(shard_dir, marker, itemsize):
            break
        done.append(marker)
    keep = {f"{part_name(m['part'])}.{ext}" for m in done for ext in ("hashes", "done.json")}
    keep |= {f"{e['name']}.{ext}" for m in done for e in m["shards"].values() if e for ext in ("ids", "wst")}
    for p in shard_dir.iterdir():
        if p.name not in keep:
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    return done


def disk_full_error(shard_dir: Path, detail: str, needed_bytes: float) -> CheckpointError:
    """The error for ENOSPC: directory, free space, space needed, and what to do."""
    free = shutil.disk_usage(shard_dir).free
    return CheckpointError(
        f"disk full while writing the corpus store in {shard_dir} ({detail}): {_mb(free)} free, about "
        f"{_mb(needed_bytes)} still needed for the rest of the store. Free space (or pass another out_dir "
        "on a larger disk) and rerun: the complete shards are kept and the preparation continues after them.")


def check_ids(shard_dir: Path, markers: list[dict], tok: dict) -> None:
    """Every shard's largest id is below ``tok["vocab_size"]`` (its marker's ``max_id``; an older part's ``.ids``
    is read).

    Raises:
        DataError: a shard with an id at or above ``vocab_size`` (the shard, the id and the fix named).
    """
    size = int(tok["vocab_size"])
    for marker in markers:
        for entry in marker["shards"].values():
            if not entry:
                continue
            path = shard_dir / f"{entry['name']}.ids"
            top = entry.get("max_id")
            if top is None:
                top = int(np.memmap(path, dtype=np.dtype(tok["dtype"]).newbyteorder("<"), mode="r").max())
            if top >= size:
                raise DataError(
                    f"{path} holds token id {top:,}, but the store's tokenizer ({shard_dir.parent / tok['dir']}) has "
                    f"{size:,} tokens: the shards were written with another tokenizer, so the store is not marked "
                    "complete. Prepare it again with overwrite=True (--overwrite), in a new process if an earlier "
                    "preparation ran in this one")
