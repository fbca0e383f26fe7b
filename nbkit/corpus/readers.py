"""The corpus sources streamed in :class:`Chunk` s: ``.txt`` lines, JSON lines, JSON arrays (element by element),
parquet and ``datasets`` columns (row batches), optionally ``.gz``/``.zst``. Memory is bounded by the longest
line. Chunk boundaries depend only on the input (a restart at one gives the same chunks: resume); a file-level
fault is a :class:`FileProblem` in stream order, the lines before it kept.
"""
from __future__ import annotations

import codecs
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nbkit.corpus.formats import FAULTS, SNIFF, fault_reason, looks_binary, open_binary, text_type_problem
from nbkit.corpus.report import convert_command
from nbkit.corpus.sources import Source
from nbkit.data.filecheck import sniff_wide_encoding
from nbkit.errors import DataError


@dataclass
class Chunk:
    """Up to ``chunk_items`` raw items of one source (``bytes`` lines, or values of parquet, JSON arrays, datasets).

    ``first_line``: 1-based line (row, element) of ``items[0]``; ``next_line``: 0-based index after the chunk
    (the resume position); ``raw_pos``: bytes of the file read so far, for progress (uncompressed: of the
    lines read; compressed: of the file on disk).
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


def iter_chunks(sources: list[Source], text_field: str, start: tuple[int, int] = (0, 0),
                chunk_items: int = 1000, chunk_bytes: int = 4 << 20,
                tmp_dir: str | Path | None = None) -> Iterator[Chunk | FileProblem]:
    """Stream ``sources`` from ``start`` = (source index, item index) as chunks of at most ``chunk_items`` items
    or ``chunk_bytes`` bytes (a compressed parquet file is first decompressed into ``tmp_dir``).

    Raises:
        DataError: a source disappeared since it was resolved.
    """
    for si in range(start[0], len(sources)):
        skip = start[1] if si == start[0] else 0
        src = sources[si]
        if src.kind == "dataset":
            yield from _dataset_chunks(si, src, text_field, skip, chunk_items)
            continue
        if not os.path.exists(src.path):
            raise DataError(f"{src.path} is gone since the preparation started; restore it or start again")
        if src.kind == "parquet":
            yield from _parquet_chunks(si, src, text_field, skip, chunk_items, tmp_dir)
        else:
            yield from _line_chunks(si, src, skip, chunk_items, chunk_bytes)


def _line_chunks(si: int, src: Source, skip: int, chunk_items: int, chunk_bytes: int):
    with open(src.path, "rb", buffering=0) as raw:
        stream, guard = open_binary(src.compression, raw)
        head = stream.peek(SNIFF)[:SNIFF]
        if not head:
            if guard.fault is not None:
                yield FileProblem(si, src.path, 1, fault_reason(guard.fault), str(guard.fault))
            else:
                yield FileProblem(si, src.path, None, "empty_file", "no bytes" if src.size_bytes == 0 else
                                  "no bytes after decompression")
            return
        wide = sniff_wide_encoding(head)
        if wide:
            conv = convert_command(src.path, f"iconv -f {wide[0]} -t UTF-8", src.compression)
            yield FileProblem(si, src.path, None, "not_utf8_file",
                              f"{wide[1]}; convert it: {conv}, and prepare the converted copy instead")
            return
        if why := looks_binary(head):
            yield FileProblem(si, src.path, None, "binary_file", why)
            return
        if src.kind == "json" and head.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"[":
            yield from _json_array_chunks(si, src, stream, guard, raw, skip, chunk_items)
            return
        if b"\r" in head and b"\n" not in head:   # old Mac line ends: each CR ends a line, as LF and CRLF do
            stream = io.BufferedReader(_CRasLF(stream), buffer_size=1 << 20)
        kind = "txt" if src.kind == "txt" else "jsonl"
        n, chunk, size, consumed = 0, None, 0, 0
        # progress: the bytes of the lines read (an uncompressed file), not raw.tell(), which runs up to the
        # 1 MB read-ahead of the buffer ahead (a small file would read as done at its first chunk)
        where = (lambda: consumed) if src.compression is None else raw.tell
        for line in stream:
            if guard.fault is not None and not line.endswith(b"\n"):
                break  # the torn last line of a truncated file: not a text
            n += 1
            consumed += len(line)
            if n <= skip:
                continue
            if chunk is None:
                chunk, size = Chunk(si, kind, n), 0
            chunk.items.append(line.rstrip(b"\r\n"))
            size += len(line)
            if len(chunk.items) >= chunk_items or size >= chunk_bytes:
                chunk.next_line, chunk.raw_pos = n, where()
                yield chunk
                chunk = None
        if chunk is not None:
            chunk.next_line, chunk.raw_pos = n, where()
            yield chunk
        if guard.fault is not None:
            yield FileProblem(si, src.path, n + 1, fault_reason(guard.fault), str(guard.fault))


class _CRasLF(io.RawIOBase):
    """The bytes of ``inner`` with every CR read as LF (a CR-only file: one byte for one, so lengths and progress
    stay those of the file)."""

    def __init__(self, inner):
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        data = self.inner.read1(len(buf)).replace(b"\r", b"\n")
        buf[:len(data)] = data
        return len(data)


def _json_array_chunks(si: int, src: Source, stream, guard, raw, skip: int, chunk_items: int):
    """Elements of one JSON array, decoded incrementally (``raw_decode`` over a sliding text buffer)."""
    decoder, dec = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8-sig")()   # a leading BOM dropped
    buf, pos, n, chunk, eof, started = "", 0, 0, None, False, False
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
    except (*FAULTS, ValueError) as exc:
        reason = "bad_utf8" if isinstance(exc, UnicodeDecodeError) else (
            fault_reason(exc) if isinstance(exc, FAULTS) else "bad_json")
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
            fd, tmp = tempfile.mkstemp(suffix=".parquet", dir=tmp_dir)
            with open(src.path, "rb", buffering=0) as raw, os.fdopen(fd, "wb") as out:
                stream, guard = open_binary(src.compression, raw)
                shutil.copyfileobj(stream, out, 1 << 20)
                if guard.fault is not None:
                    raise guard.fault
            path = tmp
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001  (pyarrow raises ArrowInvalid, OSError, ...)
        if tmp:
            os.unlink(tmp)
        yield FileProblem(si, src.path, None, fault_reason(exc), str(exc)[:200])
        return
    try:
        if pf.metadata.num_rows == 0:
            yield FileProblem(si, src.path, None, "empty_file", "no rows")
            return
        if text_field not in pf.schema_arrow.names:
            yield FileProblem(si, src.path, None, "no_text_field",
                              f"no column {text_field!r} (columns: {pf.schema_arrow.names}); pass text_field=NAME "
                              "naming the text column")
            return
        why = text_type_problem(pf.schema_arrow.field(text_field).type)
        if why:
            yield FileProblem(si, src.path, None, "not_text",
                              f"column {text_field!r} is {why}: cast it to string, or pass text_field=NAME naming "
                              "the text column")
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


def _dataset_chunks(si: int, src: Source, text_field: str, skip: int, chunk_items: int):
    """The ``text_field`` column of a ``datasets`` object in batches of ``chunk_items`` rows (never whole)."""
    ds = src.dataset.select_columns([text_field])
    rows, n, pos = len(ds) if src.reusable else None, skip, 0
    if skip:
        ds = ds.skip(skip)
    batches = (ds.with_format("arrow").iter(batch_size=chunk_items) if rows is not None else
               ds.iter(batch_size=chunk_items))
    try:
        for batch in batches:
            values = batch.column(0).to_pylist() if rows is not None else batch[text_field]
            first, n = n + 1, n + len(values)
            if rows:
                pos = src.size_bytes * n // rows
            else:   # a stream of unknown size: the UTF-8 bytes (about) read so far
                pos += sum(len(v) * 3 if isinstance(v, str) else len(v) for v in values if isinstance(v, (str, bytes)))
            yield Chunk(si, "values", first, values, n, pos)
    except Exception as exc:  # noqa: BLE001  (a stream's file or generator may fail in any way)
        yield FileProblem(si, src.path, n + 1, "unreadable_file", f"{type(exc).__name__}: {exc}"[:200])
