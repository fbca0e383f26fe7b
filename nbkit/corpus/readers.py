"""Streaming the corpus sources (:mod:`nbkit.corpus.sources`) in chunks.

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

import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nbkit.corpus.sources import Source
from nbkit.errors import DataError

_SNIFF = 8192  # bytes looked at for NUL bytes (binary / UTF-16 files)


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


_FAULTS = (EOFError, OSError, zlib.error, gzip.BadGzipFile)


class _Guarded(io.RawIOBase):
    """A decompressed stream whose read fault (truncated, corrupt) ends it cleanly and is kept in ``fault``.

    The bytes decoded before the fault are all delivered first, so the lines before it are kept.
    """

    def __init__(self, inner):
        self.inner, self.fault = inner, None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.fault is not None:
            return 0
        try:
            if isinstance(self.inner, gzip.GzipFile):  # one raw read: a fault then loses nothing decoded
                data = self.inner.read1(len(b))
                b[:len(data)] = data
                return len(data)
            return self.inner.readinto(b)
        except _FAULTS as exc:
            self.fault = exc
            return 0


def open_binary(source: Source, raw) -> tuple[io.BufferedReader, _Guarded]:
    """A buffered binary stream of ``source``'s decompressed bytes over the open raw file ``raw``, and its guard."""
    inner = (gzip.GzipFile(fileobj=raw) if source.compression == "gz" else
             _ZstdRaw(raw) if source.compression == "zst" else raw)
    guard = _Guarded(inner)
    return io.BufferedReader(guard, buffer_size=1 << 20), guard


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
        stream, guard = open_binary(src, raw)
        head = stream.peek(_SNIFF)[:_SNIFF]
        if not head:
            if guard.fault is not None:
                yield FileProblem(si, src.path, 1, _reason(guard.fault), str(guard.fault))
            else:
                yield FileProblem(si, src.path, None, "empty_file", "no bytes" if src.size_bytes == 0 else
                                  "no bytes after decompression")
            return
        if b"\0" in head:
            yield FileProblem(si, src.path, None, "binary_file",
                              "NUL bytes: a binary or UTF-16 file; convert text to UTF-8")
            return
        if src.kind == "json" and head.lstrip()[:1] == b"[":
            yield from _json_array_chunks(si, src, stream, guard, raw, skip, chunk_items)
            return
        kind = "txt" if src.kind == "txt" else "jsonl"
        n, chunk, size = 0, None, 0
        for line in stream:
            if guard.fault is not None and not line.endswith(b"\n"):
                break  # the torn last line of a truncated file: not a text
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
        if chunk is not None:
            chunk.next_line, chunk.raw_pos = n, raw.tell()
            yield chunk
        if guard.fault is not None:
            yield FileProblem(si, src.path, n + 1, _reason(guard.fault), str(guard.fault))


def _json_array_chunks(si: int, src: Source, stream, guard, raw, skip: int, chunk_items: int):
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
                if eof and guard.fault is not None:
                    raise guard.fault
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
                stream, guard = open_binary(src, raw)
                shutil.copyfileobj(stream, out, 1 << 20)
                if guard.fault is not None:
                    raise guard.fault
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
