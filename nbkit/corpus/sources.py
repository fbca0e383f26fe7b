"""Corpus inputs: files, globs and folders resolved to :class:`Source` s (format from the file name).

Formats (each optionally ``.gz`` or ``.zst``): ``.txt`` (one text per line), ``.jsonl`` / ``.json``
(JSON objects, the text under ``text_field``), ``.parquet`` (the ``text_field`` column). Reading them
is :mod:`nbkit.corpus.readers`.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def resolve_inputs(inputs) -> list[Source]:
    """Expand files, globs and folders (recursive) to sources, in argument order, each path once.

    Folders contribute their files with a known format, sorted by path; other files in them are
    ignored. A glob's matches are sorted.

    Raises:
        ConfigError: no input, an input that matches nothing, or a named file of unknown format.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if not inputs:
        raise ConfigError("prepare_corpus needs at least one input: a file, a glob or a folder")
    seen: dict[str, Source] = {}
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
            key = str(p.resolve())
            if key not in seen:
                st = p.stat()
                kind, comp = classify(p)
                seen[key] = Source(key, kind, comp, st.st_size, st.st_mtime)
    return list(seen.values())
