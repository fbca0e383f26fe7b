"""What a corpus file is, from its bytes: gz/zst streams whose read fault ends them cleanly (the lines before
it kept), a format told by content for a name that gives none (``wiki_00``), binary by a share of control
bytes, a Wikipedia dump by its first record, a text-holding Arrow type.
"""
from __future__ import annotations

import codecs
import gzip
import io
import json
import zlib

from nbkit.data.filecheck import sniff_wide_encoding

SNIFF = 65536  # bytes of a file's (decompressed) start that decide binary / UTF-16 / format
#: A file is binary from this share (0-1) of NUL or control bytes in its first 64 KB (tab, line breaks, form feed,
#: ESC excepted): text has almost none, random bytes about 10 %.
BINARY_SHARE = 0.05
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b") + b"\x7f"
_MAGIC = ((b"\x89PNG", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF8", "GIF image"),
          (b"%PDF", "PDF document"), (b"PK\x03\x04", "zip archive (or .docx/.xlsx)"), (b"\x7fELF", "executable"),
          (b"SQLite format 3", "SQLite database"), (b"7z\xbc\xaf", "7z archive"), (b"Rar!", "RAR archive"),
          (b"BZh", "bzip2-compressed file (recompress it as .gz or .zst)"),
          (b"\xfd7zXZ", "xz-compressed file (recompress it as .gz or .zst)"),
          (b"\xd0\xcf\x11\xe0", "MS Office document"), (b"ARROW1", "Arrow file"), (b"\x93NUMPY", "numpy array"))
_SNIFF_LINES = 5  # non-empty lines that decide JSON lines vs plain text


def looks_binary(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is binary (at least :data:`BINARY_SHARE` NUL or control bytes:
    one NUL byte is a bad line, not a binary file), or None."""
    share = (len(head) - len(head.translate(None, _CONTROL))) / len(head) if head else 0.0
    if share >= BINARY_SHARE:
        return (f"binary: {share:.0%} of its first {len(head):,} bytes are NUL or control bytes "
                f"(text has almost none; a file is binary from {BINARY_SHARE:.0%})")
    return None


def sniff(path: str, compression: str | None = None) -> tuple[str | None, str | None, str]:
    """A file's format by content: ``(kind, compression, "content: why")``; ``(None, None, why)`` when it is
    binary. gzip/zstd/parquet/known binaries by magic bytes, then the first 5 non-empty lines (up to 4 MB):
    JSON lines when the first and at least half are JSON objects, a JSON array from ``[{``, else text.

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
        head = stream.peek(SNIFF)[:SNIFF]
        if not head:
            why = f"data that does not decompress ({guard.fault})" if guard.fault is not None else "empty file"
            return "txt", comp, f"content: {packed}{why}; read as text (its reader reports it)"
        wide = sniff_wide_encoding(head)
        if wide:
            return "txt", comp, f"content: {packed}{wide[1]} text"
        if why := looks_binary(head):
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


def first_record(src) -> dict | None:
    """The first record (dict) of a JSON lines file, parquet file or ``datasets`` source ``src``; else None
    (plain text, a JSON array, a broken file). Reads at most 4 MB."""
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
    """None when a column of ``arrow_type`` holds text (string or binary kinds, a dictionary or list of them,
    null); else the type in words (``"int64 (Arrow type), not text"``)."""
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


FAULTS = (EOFError, OSError, zlib.error, gzip.BadGzipFile)


class _Guarded(io.RawIOBase):
    """A decompressed stream whose read fault (truncated, corrupt) ends it after every byte decoded before it;
    the fault is kept in ``fault``."""

    def __init__(self, inner):
        self.inner, self.fault = inner, None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.fault is not None:
            return 0
        try:
            if isinstance(self.inner, gzip.GzipFile):  # one raw read: a fault then loses nothing decoded
                return self.inner.readinto1(b)
            return self.inner.readinto(b)
        except FAULTS as exc:
            self.fault = exc
            return 0


def open_binary(compression: str | None, raw) -> tuple[io.BufferedReader, _Guarded]:
    """``(buffered stream of the decompressed bytes, its guard)`` over the open raw file ``raw``;
    ``compression``: None, "gz" or "zst"."""
    guard = _Guarded(gzip.GzipFile(fileobj=raw) if compression == "gz" else _ZstdRaw(raw) if compression == "zst"
                     else raw)
    return io.BufferedReader(guard, buffer_size=1 << 20), guard


def fault_reason(exc: BaseException) -> str:
    """The ``dropped`` reason of a read fault: ``truncated_file`` (EOFError) or ``unreadable_file``."""
    return "truncated_file" if isinstance(exc, EOFError) else "unreadable_file"
