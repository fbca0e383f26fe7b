"""Corpus inputs: files, globs and folders resolved to :class:`Source` s (format from the file name).

Formats (each optionally ``.gz`` or ``.zst``): ``.txt`` (one text per line), ``.jsonl`` / ``.json``
(JSON objects, the text under ``text_field``), ``.parquet`` (the ``text_field`` column). Reading them
is :mod:`nbkit.corpus.readers`. A prepared store's own files (``manifest.json``, ``tokenizer/``'s
``vocab.txt`` and ``tokenizer.json``, ...) are never inputs: a folder that is, holds or lies in a store
is refused (:func:`resolve_inputs`).
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit.corpus.store import holds_store_files
from nbkit.errors import ConfigError

KINDS = {".txt": "txt", ".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gz", ".zst": "zst"}


@dataclass(frozen=True)
class Source:
    """One input file: ``path`` (absolute), ``kind`` (txt/jsonl/json/parquet), ``compression`` (None/gz/zst)."""

    path: str
    kind: str
    compression: str | None
    size_bytes: int
    mtime: float

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size_bytes": self.size_bytes, "mtime": self.mtime,
                "kind": self.kind, "compression": self.compression}


def classify(path: Path) -> tuple[str, str | None] | None:
    """``(kind, compression)`` from the file name (``a.jsonl.gz`` -> ``("jsonl", "gz")``), None if unknown."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    kind = KINDS.get(suffixes[-1]) if suffixes else None
    return (kind, compression) if kind else None


def fingerprint(path) -> str:
    """SHA-256 (hex) of the file's bytes as stored (compressed files: their compressed bytes), read in 1 MB blocks.

    Recorded per input at preparation, it tells a touched or copied file (same content, new
    modification time) from an edited one. Cost per MB, measured on the shared 2-core dev machine
    (load about 3.5): 0.67 ms to hash from memory (hashlib's SHA-256 on the CPU's SHA extensions;
    blake2b 1.28, md5 1.57), 1.2-1.5 ms read from the page cache and hashed, so about 1.5 s per GB
    (plus the disk's read time when not cached) beside 3-4 min per GB of preparing.

    Raises:
        OSError: the file cannot be read.
    """
    import hashlib

    h, buf = hashlib.sha256(), bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def _store_of(path: Path, cache: dict[Path, bool]) -> Path | None:
    """The nearest folder holding store files among the parents of the file ``path`` (absolute)."""
    for folder in path.parents:
        if folder not in cache:
            cache[folder] = holds_store_files(folder)
        if cache[folder]:
            return folder
    return None


def _store_error(text: str, path: Path, store: Path) -> ConfigError:
    done = (store / "manifest.json").is_file()
    what = "a prepared corpus store" if done else "a corpus store whose preparation has not finished"
    fix = ("train on it as it is: pass it alone (corpus=STORE, --corpus STORE)" if done else
           "finish it with its original command (it resumes)")
    where = (f"{text!r} is {what} ({store})" if path.resolve() == store.resolve() else
             f"{text!r} {'holds' if store.resolve().is_relative_to(path.resolve()) else 'lies in'} {what} "
             f"at {store}")
    return ConfigError(f"{where}: its manifest.json, vocab.txt, tokenizer.json, ... are not text to prepare. "
                       f"To use the store, {fix}; to prepare raw text, name its files or folders without "
                       "the store (a store's manifest.json lists its own inputs under \"sources\")")


def resolve_inputs(inputs) -> list[Source]:
    """Expand files, globs and folders (recursive) to sources, in argument order, each path once.

    Folders contribute their files with a known format, sorted by path; other files in them are
    ignored. A glob's matches are sorted.

    Raises:
        ConfigError: no input, an input that matches nothing, a named file of unknown format, or an
            input that is, holds or lies in a corpus store (``shards/`` beside ``manifest.json`` or
            ``prepare.json``): a store is never read as text (the message names the store and the fix).
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if not inputs:
        raise ConfigError("prepare_corpus needs at least one input: a file, a glob or a folder")
    seen: dict[str, Source] = {}
    stores: dict[Path, bool] = {}
    for item in inputs:
        text = os.fspath(item)
        path = Path(text).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and classify(p))
        elif path.is_file():
            if classify(path) is None:
                raise ConfigError(f"{path}: unknown format; name it .txt, .jsonl, .json or .parquet "
                                  "(optionally .gz or .zst)")
            found = [path]
        elif glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(os.path.expanduser(text), recursive=True)
                           if Path(p).is_file() and classify(Path(p)))
        else:
            found = []
        if not found:
            raise ConfigError(f"input {text!r} matches no corpus file (.txt, .jsonl, .json, .parquet, "
                              "optionally .gz/.zst); check the path")
        for p in found:
            store = _store_of(p.resolve(), stores)
            if store is not None:
                raise _store_error(text, path, store)
            key = str(p.resolve())
            if key not in seen:
                st = p.stat()
                kind, comp = classify(p)
                seen[key] = Source(key, kind, comp, st.st_size, st.st_mtime)
    return list(seen.values())
