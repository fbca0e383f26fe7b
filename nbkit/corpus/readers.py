"""Streaming the corpus sources (:mod:`nbkit.corpus.sources`) in chunks, and telling a file's format by content.

Formats (by file name, else by content: :func:`sniff`; each optionally ``.gz`` or ``.zst``):

- ``.txt``: one text per line (UTF-8);
- ``.jsonl`` / ``.json``: one JSON object per line, the text under ``text_field``; a ``.json``
  file whose first visible character is ``[`` is read as one array of objects, element by element;
- ``.parquet``: the ``text_field`` column, read in batches of rows (a compressed parquet file is
  first decompressed to a temporary file beside the store, since parquet needs random access); a
  string, large_string, dictionary or binary (UTF-8) column, or a list of them (paragraphs); another
  Arrow type refuses the file, named (:func:`text_type_problem`);
- a ``datasets.Dataset`` / ``IterableDataset``: the ``text_field`` column in batches of rows.

A UTF-8 byte order mark is ignored (also before a JSON array). A file is binary only when at least
:data:`BINARY_SHARE` of its first :data:`_SNIFF` bytes are NUL or other control bytes (text has almost
none): one NUL byte in a text file drops only its line (``nul_byte``, by the worker).

Nothing is read whole: lines come from a buffered stream, parquet in row batches, JSON arrays
through an incremental decoder. One *line* (or array element, or parquet row) is held at a time, so
memory is bounded by the longest line (a 50 MB line costs about 50 MB once; it is cut into pieces
by the worker before any per-text step).

The stream is cut into :class:`Chunk` s of at most ``chunk_items`` lines or ``chunk_bytes`` bytes,
counted from the chunk's start, never across a source boundary; so chunk boundaries depend only on
the input, and a stream restarted at a chunk boundary gives the same chunks again (resume).
File-level faults (empty file, binary file, UTF-16/UTF-32 text, truncated or corrupt compression,
unreadable parquet, a parquet column that is not text) come as :class:`FileProblem` items in stream order; the lines before the fault are kept.
"""
from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.data.filecheck import sniff_wide_encoding
from nbkit.errors import DataError

if TYPE_CHECKING:
    from nbkit.corpus.sources import Source

_SNIFF = 65536  # bytes of a file's (decompressed) start that decide binary / UTF-16 / format
#: A file is binary when at least this share of its first 64 KB are NUL or control bytes (tab, line breaks,
#: form feed and ESC excepted). UTF-8 or GBK text has almost none; random bytes (compressed data, images)
#: about 10 %; a text file with one NUL byte in 64 KB 0.002 %.
BINARY_SHARE = 0.05
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b") + b"\x7f"
_MAGIC = ((b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
          (b"%PDF", "PDF document"), (b"PK\x03\x04", "zip archive (or .docx/.xlsx)"), (b"\x7fELF", "executable"),
          (b"SQLite format 3", "SQLite database"), (b"7z\xbc\xaf", "7z archive"), (b"Rar!", "RAR archive"),
          (b"BZh", "bzip2-compressed file (recompress it as .gz or .zst)"),
          (b"\xfd7zXZ", "xz-compressed file (recompress it as .gz or .zst)"),
          (b"\xd0\xcf\x11\xe0", "MS Office document"), (b"ARROW1", "Arrow file"), (b"\x93NUMPY", "numpy array"))
_SNIFF_LINES = 5  # non-empty lines that decide JSON lines vs plain text


def control_share(head: bytes) -> float:
    """Share (0-1) of ``head``'s bytes that are NUL or control bytes (not tab, line breaks, form feed, ESC)."""
    return (len(head) - len(head.translate(None, _CONTROL))) / len(head) if head else 0.0


def _looks_binary(head: bytes) -> str | None:
    share = control_share(head)
    if share >= BINARY_SHARE:
        return (f"binary: {share:.0%} of its first {len(head):,} bytes are NUL or control bytes "
                f"(text has almost none; a file is binary from {BINARY_SHARE:.0%})")
    return None


def sniff(path: str, compression: str | None = None) -> tuple[str | None, str | None, str]:
    """A file's format by content: ``(kind, compression, "content: why")``, or ``(None, None, why)`` for a
    file that is not corpus text (binary by magic bytes or by :data:`BINARY_SHARE`).

    Order: gzip / zstd by magic bytes (then the decompressed start is looked at), parquet (``PAR1``),
    known binary formats; then the first :data:`_SNIFF_LINES` non-empty lines (read up to 4 MB): JSON
    lines when the first is a JSON object and at least half are; a JSON array when the text starts
    with ``[`` and ``{``; else plain text (UTF-16 or GBK text too: their reader reports them).

    Raises:
        OSError: the file cannot be opened.
    """
    with open(path, "rb", buffering=0) as raw:
        magic = raw.read(16)
        raw.seek(0)
        comp = compression or ("gz" if magic[:2] == b"\x1f\x8b" else "zst" if magic[:4] == b"\x28\xb5\x2f\xfd"
                               else None)
        packed = f"{comp}-compressed " if comp else ""
        if comp is None:
            if magic[:4] == b"PAR1":
                return "parquet", None, "content: parquet (PAR1 magic bytes)"
            for sig, what in _MAGIC:
                if magic.startswith(sig):
                    return None, None, f"a {what} (magic bytes {sig[:4]!r})"
        stream, guard = open_binary(comp, raw)
        head = stream.peek(_SNIFF)[:_SNIFF]
        if not head:
            why = f"data that does not decompress ({guard.fault})" if guard.fault is not None else "empty file"
            return "txt", comp, f"content: {packed}{why}; read as text (its reader reports it)"
        wide = sniff_wide_encoding(head)
        if wide:
            return "txt", comp, f"content: {packed}{wide[1]} text"
        if why := _looks_binary(head):
            return None, None, why
        lines, size, filled, eof = [], 0, 0, False
        while filled < _SNIFF_LINES and size < 4 << 20:
            line = stream.readline(4 << 20)
            if not line:
                eof = True
                break
            lines.append(line)
            size, filled = size + len(line), filled + bool(line.strip())
    lines[0] = lines[0].removeprefix(codecs.BOM_UTF8)
    first = next((x.strip() for x in lines if x.strip()), b"")
    complete = [x.strip() for x in lines if x.strip() and (x.endswith(b"\n") or eof)]
    if first[:1] == b"[" and first[1:].lstrip()[:1] in (b"{", b""):
        return "json", comp, f"content: {packed}a JSON array (starts with '[')"
    objects = sum(1 for x in complete if _is_object(x))
    if first[:1] == b"{" and not complete:
        return "jsonl", comp, f"content: {packed}JSON lines (a first line over 4 MB that starts with '{{')"
    said = f"{objects} of the first {len(complete)} non-empty lines are JSON objects"
    if first[:1] == b"{" and objects * 2 >= len(complete):
        return "jsonl", comp, f"content: {packed}JSON lines ({said})"
    return "txt", comp, f"content: {packed}plain text ({said})"


def first_record(src: Source) -> dict | None:
    """The first record of a JSON lines file, a parquet file's first row, a ``datasets`` object's first row
    (a dict), or None (plain text, a JSON array, an unreadable or empty file). Reads at most 4 MB."""
    try:
        if src.kind == "dataset":
            ds = src.dataset
            return dict(ds[0]) if src.reusable and len(ds) else next(iter(ds), None)
        if src.kind == "parquet" and not src.compression:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(src.path)
            batch = next(pf.iter_batches(batch_size=1), None)
            return batch.to_pylist()[0] if batch is not None and batch.num_rows else None
        if src.kind != "jsonl":
            return None
        with open(src.path, "rb", buffering=0) as raw:
            stream, _ = open_binary(src.compression, raw)
            for _ in range(_SNIFF_LINES):
                line = stream.readline(4 << 20).removeprefix(codecs.BOM_UTF8)
                if line.strip():
                    value = json.loads(line)
                    return value if isinstance(value, dict) else None
    except Exception:  # noqa: BLE001  (a broken file: its reader reports it; here it is only "not a record")
        return None
    return None


def is_wikipedia(record: dict | None) -> bool:
    """True for a Wikipedia article's record: a ``url`` on wikipedia.org (wiki_zh, HF's wikimedia/wikipedia)."""
    url = record.get("url") if isinstance(record, dict) else None
    return isinstance(url, str) and "wikipedia.org/" in url


def _is_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:   # JSONDecodeError and UnicodeDecodeError
        return False


def text_type_problem(arrow_type) -> str | None:
    """None when a column of ``arrow_type`` holds text (string, large_string, string_view, binary as UTF-8,
    a dictionary of those, a list of those as paragraphs, or null); else the type in words (``"int64 (Arrow type)"``)."""
    import pyarrow.types as pat

    t = arrow_type
    if pat.is_dictionary(t):
        t = t.value_type
    if pat.is_list(t) or pat.is_large_list(t) or getattr(pat, "is_list_view", lambda _: False)(t):
        t = t.value_type
        if pat.is_dictionary(t):
            t = t.value_type
    texty = (pat.is_string(t) or pat.is_large_string(t) or pat.is_binary(t) or pat.is_large_binary(t)
             or pat.is_null(t) or getattr(pat, "is_string_view", lambda _: False)(t)
             or getattr(pat, "is_binary_view", lambda _: False)(t))
    return None if texty else f"{arrow_type} (Arrow type), not text"


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


def open_binary(compression: str | None, raw) -> tuple[io.BufferedReader, _Guarded]:
    """A buffered binary stream of the decompressed bytes (``compression``: None, "gz", "zst") over the open raw
    file ``raw``, and its guard."""
    inner = (gzip.GzipFile(fileobj=raw) if compression == "gz" else
             _ZstdRaw(raw) if compression == "zst" else raw)
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
        head = stream.peek(_SNIFF)[:_SNIFF]
        if not head:
            if guard.fault is not None:
                yield FileProblem(si, src.path, 1, _reason(guard.fault), str(guard.fault))
            else:
                yield FileProblem(si, src.path, None, "empty_file", "no bytes" if src.size_bytes == 0 else
                                  "no bytes after decompression")
            return
        wide = sniff_wide_encoding(head)
        if wide:
            yield FileProblem(si, src.path, None, "not_utf8_file",
                              f"{wide[1]}; convert it: iconv -f {wide[0]} -t UTF-8 FILE > FILE.utf8 (zcat/zstdcat "
                              "first when compressed), and prepare the converted copy")
            return
        if why := _looks_binary(head):
            yield FileProblem(si, src.path, None, "binary_file", why)
            return
        if src.kind == "json" and head.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"[":
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
    decoder, dec = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8-sig")()   # a leading BOM dropped
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
                stream, guard = open_binary(src.compression, raw)
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
        why = text_type_problem(pf.schema_arrow.field(text_field).type)
        if why:
            yield FileProblem(si, src.path, None, "not_text",
                              f"column {text_field!r} is {why}: cast it to string, or pass text_field= naming the "
                              "text column")
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
