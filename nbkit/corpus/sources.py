"""Corpus inputs: files, globs and folders resolved to sources, then streamed in chunks.

Formats (by file name; each optionally ``.gz`` or ``.zst``):

- ``.txt``: one text per line (UTF-8);
- ``.jsonl`` / ``.json``: one JSON object per line, the text under ``text_field``; a ``.json``
  file whose first visible character is ``[`` is read as one array of objects, element by element;
- ``.parquet``: the ``text_field`` column, read in batches of rows (a compressed parquet file is
  first decompressed to a temporary file beside the store, since parquet needs random access).

Nothing is read whole: lines come from a buffered stream, parquet in row batches, JSON arrays
through an incremental decoder. One *line* (or array element, or parquet row) is held at a time, so
memory is bounded by the longest line (a 50 MB line costs about 50 MB once; it is cut into pieces
by the worker before any per-text step).

The stream is cut into :class:`Chunk` s of at most ``chunk_items`` lines or ``chunk_bytes`` bytes,
counted from the chunk's start, never across a source boundary; so chunk boundaries depend only on
the input, and a stream restarted at a chunk boundary gives the same chunks again (resume).
File-level faults (empty file, binary file, truncated or corrupt compression, unreadable parquet)
come as :class:`FileProblem` items in stream order; the lines before the fault are kept.
"""
from __future__ import annotations

import glob
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbkit.errors import ConfigError, DataError

KINDS = {".txt": "txt", ".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gz", ".zst": "zst"}
_SNIFF = 8192  # bytes looked at for NUL bytes (binary / UTF-16 files)


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


@dataclass
class Chunk:
    """Up to ``chunk_items`` raw items of one source: ``bytes`` lines, or values already read (parquet, JSON array).

    ``first_line`` is the 1-based line (row, element) number of ``items[0]``; ``next_line`` the 0-based
    index of the item after the chunk (the resume position inside the source); ``raw_pos`` the bytes of
    the (compressed) file consumed so far, for progress.
    """

    source: int
    kind: str
    first_line: int
    items: list = field(default_factory=list)
    next_line: int = 0
    raw_pos: int = 0


@dataclass
class FileProblem:
    """A fault of a whole file (or of its rest): ``reason`` is a ``dropped`` key, ``line`` 1-based or None."""

    source: int
    path: str
    line: int | None
    reason: str
    detail: str = ""


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


class _ZstdRaw(io.RawIOBase):
    """A zstd stream as a raw file that raises EOFError when the data ends inside a frame (truncated)."""

    def __init__(self, fh):
        import zstandard

        self._zstd, self._fh = zstandard, fh
        self._d = zstandard.ZstdDecompressor().decompressobj()
        self._buf, self._started, self._done = b"", False, False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf and not self._done:
            data = self._fh.read(1 << 20)
            if not data:
                self._done = True
                if self._started and not self._d.eof:
                    raise EOFError("zstd data ends inside a frame (truncated file)")
                break
            self._started = True
            try:
                self._buf = self._d.decompress(data)
                while self._d.eof and self._d.unused_data:  # several frames
                    rest = self._d.unused_data
                    self._d = self._zstd.ZstdDecompressor().decompressobj()
                    self._buf += self._d.decompress(rest)
            except self._zstd.ZstdError as exc:
                raise zlib.error(f"corrupt zstd data: {exc}") from exc
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n


def open_binary(source: Source, raw):
    """A buffered binary stream of ``source``'s decompressed bytes over the open raw file ``raw``."""
    if source.compression == "gz":
        return io.BufferedReader(gzip.GzipFile(fileobj=raw), buffer_size=1 << 20)
    if source.compression == "zst":
        return io.BufferedReader(_ZstdRaw(raw), buffer_size=1 << 20)
    return io.BufferedReader(raw, buffer_size=1 << 20)


_FAULTS = (EOFError, OSError, zlib.error, gzip.BadGzipFile)


def _reason(exc: BaseException) -> str:
    return "truncated_file" if isinstance(exc, EOFError) else "unreadable_file"


def iter_chunks(sources: list[Source], text_field: str, start: tuple[int, int] = (0, 0),
                chunk_items: int = 1000, chunk_bytes: int = 4 << 20,
                tmp_dir: str | Path | None = None) -> Iterator[Chunk | FileProblem]:
    """Stream ``sources`` from ``start`` = (source index, item index) as chunks and file problems.

    Raises:
        DataError: a source disappeared since it was resolved.
    """
    for si in range(start[0], len(sources)):
        skip = start[1] if si == start[0] else 0
        src = sources[si]
        if not os.path.exists(src.path):
            raise DataError(f"{src.path} is gone since the preparation started; restore it or start again")
        if src.kind == "parquet":
            yield from _parquet_chunks(si, src, text_field, skip, chunk_items, tmp_dir)
        else:
            yield from _line_chunks(si, src, skip, chunk_items, chunk_bytes)


def _line_chunks(si: int, src: Source, skip: int, chunk_items: int, chunk_bytes: int):
    with open(src.path, "rb", buffering=0) as raw:
        stream = open_binary(src, raw)
        try:
            head = stream.peek(_SNIFF)[:_SNIFF]
        except _FAULTS as exc:
            yield FileProblem(si, src.path, None, _reason(exc), str(exc))
            return
        if not head:
            yield FileProblem(si, src.path, None, "empty_file", "no bytes" if src.size_bytes == 0 else
                              "no bytes after decompression")
            return
        if b"\0" in head:
            yield FileProblem(si, src.path, None, "binary_file",
                              "NUL bytes: a binary or UTF-16 file; convert text to UTF-8")
            return
        if src.kind == "json" and head.lstrip()[:1] == b"[":
            yield from _json_array_chunks(si, src, stream, raw, skip, chunk_items)
            return
        kind = "txt" if src.kind == "txt" else "jsonl"
        n, chunk, size = 0, None, 0
        try:
            for line in stream:
                n += 1
                if n <= skip:
                    continue
                if chunk is None:
                    chunk, size = Chunk(si, kind, n), 0
                chunk.items.append(line.rstrip(b"\r\n"))
                size += len(line)
                if len(chunk.items) >= chunk_items or size >= chunk_bytes:
                    chunk.next_line, chunk.raw_pos = n, raw.tell()
                    yield chunk
                    chunk = None
        except _FAULTS as exc:
            problem = FileProblem(si, src.path, n + 1, _reason(exc), str(exc))
        else:
            problem = None
        if chunk is not None:
            chunk.next_line, chunk.raw_pos = n, raw.tell()
            yield chunk
        if problem is not None:
            yield problem


def _json_array_chunks(si: int, src: Source, stream, raw, skip: int, chunk_items: int):
    """Elements of one JSON array, decoded incrementally (``raw_decode`` over a sliding text buffer)."""
    import codecs

    decoder, dec = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8")()
    buf, pos, n, chunk, eof = "", 0, 0, None, False
    started = False
    try:
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if not started and pos < len(buf):
                if buf[pos] != "[":
                    raise ValueError("not a JSON array")
                started, pos = True, pos + 1
                continue
            if started and pos < len(buf) and buf[pos] == "]":
                break
            try:
                if pos >= len(buf):
                    raise ValueError("need more")
                value, end = decoder.raw_decode(buf, pos)
            except ValueError:
                if eof:
                    raise ValueError(f"JSON array broken or unterminated after element {n}") from None
                data = stream.read(1 << 20)
                eof = not data
                buf = buf[pos:] + dec.decode(data, final=eof)
                pos = 0
                continue
            pos, n = end, n + 1
            if n <= skip:
                continue
            if chunk is None:
                chunk = Chunk(si, "json", n)
            chunk.items.append(value)
            if len(chunk.items) >= chunk_items:
                chunk.next_line, chunk.raw_pos = n, raw.tell()
                yield chunk
                chunk = None
        problem = None
    except (*_FAULTS, ValueError) as exc:
        reason = "bad_utf8" if isinstance(exc, UnicodeDecodeError) else (
            _reason(exc) if isinstance(exc, _FAULTS) else "bad_json")
        problem = FileProblem(si, src.path, n + 1, reason, str(exc)[:200])
    if chunk is not None:
        chunk.next_line, chunk.raw_pos = n, raw.tell()
        yield chunk
    if problem is not None:
        yield problem


def _parquet_chunks(si: int, src: Source, text_field: str, skip: int, chunk_items: int, tmp_dir):
    import pyarrow.parquet as pq

    path, tmp = src.path, None
    try:
        if src.compression:
            import shutil
            import tempfile

            fd, tmp = tempfile.mkstemp(suffix=".parquet", dir=tmp_dir)
            with open(src.path, "rb", buffering=0) as raw, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(open_binary(src, raw), out, 1 << 20)
            path = tmp
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001  (pyarrow raises ArrowInvalid, OSError, ...)
        if tmp:
            os.unlink(tmp)
        reason = "truncated_file" if isinstance(exc, EOFError) else "unreadable_file"
        yield FileProblem(si, src.path, None, reason, str(exc)[:200])
        return
    try:
        if pf.metadata.num_rows == 0:
            yield FileProblem(si, src.path, None, "empty_file", "no rows")
            return
        if text_field not in pf.schema_arrow.names:
            yield FileProblem(si, src.path, None, "no_text_field",
                              f"no column {text_field!r} (columns: {pf.schema_arrow.names}); pass text_field=")
            return
        n = 0
        try:
            for batch in pf.iter_batches(batch_size=chunk_items, columns=[text_field]):
                values = batch.column(0).to_pylist()
                first, n = n + 1, n + len(values)
                if n <= skip:
                    continue
                cut = max(0, skip - first + 1)
                yield Chunk(si, "parquet", first + cut, values[cut:], n, src.size_bytes * n // pf.metadata.num_rows)
        except Exception as exc:  # noqa: BLE001
            yield FileProblem(si, src.path, n + 1, "unreadable_file", str(exc)[:200])
    finally:
        if tmp:
            os.unlink(tmp)
