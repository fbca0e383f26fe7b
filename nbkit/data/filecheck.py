"""Diagnose a user's file before loading it: encoding, and where JSON breaks.

- :func:`check_utf8` reads the file in 1 MiB chunks and raises a
  :class:`~nbkit.errors.DataError` for non-UTF-8 bytes, worded by
  :func:`non_utf8_message` (every loader uses it): the byte offset and line, and
  the fix that fits the file: ``iconv -f GBK`` only when the file reads as GBK,
  otherwise the bad lines and how to drop or replace them (UTF-16/UTF-32 are
  recognised by their byte order mark or NUL bytes, :func:`sniff_wide_encoding`).
- :func:`locate_json_error` finds the first bad line (1-based) of a JSON-lines
  file, or the first field whose type changes, so the error can point at it.

Used by :mod:`nbkit.data.userfiles`, which re-exports both checks.
"""
from __future__ import annotations

import codecs
import json
from pathlib import Path

from nbkit.errors import DataError

_CHUNK = 1 << 20  # 1 MiB read size for the UTF-8 check
_SNIFF = 4096  # bytes inspected for UTF-16/UTF-32 (BOM or NUL bytes)

#: byte order mark -> (iconv encoding name, description); UTF-32 first (its LE BOM starts like UTF-16's)
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32", "UTF-32 (little-endian, byte order mark FF FE 00 00)"),
    (codecs.BOM_UTF32_BE, "UTF-32", "UTF-32 (big-endian, byte order mark 00 00 FE FF)"),
    (codecs.BOM_UTF16_LE, "UTF-16", "UTF-16 (little-endian, byte order mark FF FE)"),
    (codecs.BOM_UTF16_BE, "UTF-16", "UTF-16 (big-endian, byte order mark FE FF)"),
)


def sniff_wide_encoding(head: bytes) -> tuple[str, str] | None:
    """``(iconv name, description)`` if ``head`` looks UTF-16/UTF-32, else None.

    A byte order mark decides. Without one, UTF-16 is recognised by its NUL
    bytes: every ASCII character (delimiters, quotes, newlines, a CSV header)
    has a zero high byte, at odd offsets in little-endian and even offsets in
    big-endian text. Text files in UTF-8 or GBK hold no NUL bytes.

    Args:
        head: the first bytes of the file (a few KiB suffice).
    """
    for bom, name, desc in _WIDE_BOMS:
        if head.startswith(bom):
            return name, desc
    pairs = len(head) // 2
    even, odd = head[0:2 * pairs:2].count(0), head[1:2 * pairs:2].count(0)
    if odd >= max(1, pairs / 10) and even <= odd / 4:
        return "UTF-16LE", "UTF-16 little-endian without a byte order mark (NUL bytes at odd offsets)"
    if even >= max(1, pairs / 10) and odd <= even / 4:
        return "UTF-16BE", "UTF-16 big-endian without a byte order mark (NUL bytes at even offsets)"
    return None


def check_utf8(path: Path) -> str:
    """Check that ``path`` is UTF-8 and return the codec to read it with.

    Reads the file in 1 MiB chunks with an incremental decoder (constant
    memory on big corpora). Returns ``"utf-8-sig"`` when the file starts with
    a byte order mark (Excel's "CSV UTF-8" export), else ``"utf-8"``.

    Raises:
        DataError: the file is UTF-16/UTF-32 (see :func:`sniff_wide_encoding`;
            the fix is ``iconv -f UTF-16 -t UTF-8``), or a byte sequence is not
            UTF-8; the message (:func:`non_utf8_message`) gives the byte offset
            (0-based), the line (1-based) and the fix that fits the file.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    converted = path.with_suffix(".utf8" + path.suffix)
    with open(path, "rb") as f:
        head = f.read(_SNIFF)
        wide = sniff_wide_encoding(head)
        if wide:
            raise DataError(
                f"{path} is {wide[1]}, not UTF-8 (Excel's \"Unicode text\" export writes UTF-16). "
                f"Convert it with `iconv -f {wide[0]} -t UTF-8 '{path}' > '{converted}'` and load the "
                "converted copy, or save it from Excel as \"CSV UTF-8\".")
        f.seek(0)
        while True:
            chunk = f.read(_CHUNK)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as err:
                raise DataError(non_utf8_message(path)) from err
            if not chunk:
                break
    return "utf-8-sig" if head.startswith(codecs.BOM_UTF8) else "utf-8"


def new_scan() -> dict:
    """An empty line scan (see :func:`scan_lines` for the keys); fill it with :func:`scan_line`."""
    return {"lines": 0, "non_ascii_lines": 0, "utf8_lines": 0, "bad_lines": 0, "bad": [], "gbk": True}


def scan_line(scan: dict, line: bytes, lineno: int, offset: int | None = None, utf8_ok: bool | None = None,
              keep: int = 5) -> None:
    """Count one line (``bytes``, 1-based ``lineno``) into ``scan``: the one per-line rule of every encoding check.

    ``utf8_ok``: whether the caller already decoded the line as UTF-8 (None: decode it here). The
    GBK check runs only while every non-ASCII line so far decodes as GBK, so on a UTF-8 file it stops
    after the first line or two (about 1 % of UTF-8 Chinese lines also decode as GBK).
    ``offset``: the line's 0-based byte offset in the file, or None where unknown (compressed input).
    """
    scan["lines"] = max(scan["lines"], lineno)
    if line.isascii():
        return
    scan["non_ascii_lines"] += 1
    start = 0
    if utf8_ok is None or (not utf8_ok and len(scan["bad"]) < keep):  # decode (again) only for a located line
        try:
            line.decode("utf-8")
            utf8_ok = True
        except UnicodeDecodeError as err:
            utf8_ok, start = False, err.start
    if utf8_ok:
        scan["utf8_lines"] += 1
    else:
        scan["bad_lines"] += 1
        if len(scan["bad"]) < keep:
            scan["bad"].append((lineno, None if offset is None else offset + start, line[start]))
    if scan["gbk"]:
        try:
            line.decode("gbk")
        except UnicodeDecodeError:
            scan["gbk"] = False


def merge_scans(first: dict, then: dict, keep: int = 5) -> dict:
    """The scan of ``first``'s lines followed by ``then``'s (e.g. two chunks of one file, in file order)."""
    out = {k: first[k] + then[k] for k in ("non_ascii_lines", "utf8_lines", "bad_lines")}
    out.update(lines=max(first["lines"], then["lines"]), gbk=first["gbk"] and then["gbk"],
               bad=[tuple(b) for b in (list(first["bad"]) + list(then["bad"]))[:keep]])
    return out


def scan_lines(path: Path, keep: int = 5) -> dict:
    """Which lines of ``path`` are not UTF-8, and whether the file reads as GBK.

    Reads the file once, line by line in binary (``0x0A`` never occurs inside a
    UTF-8 or GBK multi-byte character, so no character spans two lines).

    Returns ``{"lines", "non_ascii_lines", "utf8_lines"`` (non-ASCII lines that
    are valid UTF-8), ``"bad_lines"`` (count), ``"bad"`` (the first ``keep`` as
    ``(line, offset, byte)``, line 1-based, offset 0-based in the file), ``"gbk"``
    (every non-ASCII line decodes as GBK)``}``.
    """
    out = new_scan()
    offset = 0
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, start=1):
            scan_line(out, line, lineno, offset, keep=keep)
            offset += len(line)
    return out


def utf8_verdict(scan: dict) -> str:
    """What a scan with bad lines says about the file, the one rule of every loader and of the corpus report.

    ``"gbk"``: every non-ASCII line decodes as GBK and more of them fail UTF-8 than pass (convert the
    file from GBK); ``"broken_lines"``: more non-ASCII lines pass UTF-8 than fail (UTF-8 with a few
    broken lines: converting it from GBK would garble the good ones); ``"unknown"``: neither.
    """
    if scan["gbk"] and scan["bad_lines"] > scan["utf8_lines"]:
        return "gbk"
    return "broken_lines" if scan["utf8_lines"] >= scan["bad_lines"] else "unknown"


def non_utf8_message(path: Path) -> str:
    """The one wording, for every loader, of "this file is not UTF-8" with the fix that fits it.

    The case is :func:`utf8_verdict`'s:

    - GBK (every non-ASCII line decodes as GBK, and more of them fail UTF-8 than
      pass): ``iconv -f GBK -t UTF-8``.
    - Mostly UTF-8 with a few broken lines (more non-ASCII lines pass UTF-8 than
      fail): the bad line numbers, and how to drop the bad bytes (``iconv -c``),
      drop the lines (``sed``, up to 5 lines) or replace the bytes with U+FFFD
      (Python's ``errors="replace"``). Converting such a file "from GBK" would
      garble every good line.
    - Neither: find the encoding (``file -bi``) and convert with ``iconv``.

    The first bad byte is named as ``byte 0xNN at offset N (line L)`` in all three.
    """
    scan = scan_lines(path)
    if not scan["bad"]:  # the file changed since the failed read
        return f"{path} is not UTF-8 (it changed while being read?); load it again."
    line, offset, byte = scan["bad"][0]
    converted = path.with_suffix(".utf8" + path.suffix)
    first = f"byte 0x{byte:02x} at offset {offset} (line {line})"
    verdict = utf8_verdict(scan)
    if verdict == "gbk":
        return (f"{path} is not UTF-8: {first} cannot be decoded, and the file reads as GBK "
                f"(common for Chinese text). Convert it with `iconv -f GBK -t UTF-8 '{path}' > '{converted}'` "
                "and load the converted copy.")
    listed = ", ".join(str(b[0]) for b in scan["bad"]) + (", ..." if scan["bad_lines"] > len(scan["bad"]) else "")
    lines = f"{scan['bad_lines']} of {scan['lines']} line(s) (line {listed})"
    if verdict == "broken_lines":
        sed = (" drop the line(s): `sed " + " ".join(f"-e '{b[0]}d'" for b in scan["bad"])
               + f" '{path}' > '{converted}'`;" if scan["bad_lines"] <= len(scan["bad"]) else "")
        return (f"{path} is not UTF-8: {first} cannot be decoded. The file is UTF-8 apart from {lines} "
                f"holding bytes that are not, so converting it from GBK would garble the good lines. Drop the bad "
                f"bytes: `iconv -c -f UTF-8 -t UTF-8 '{path}' > '{converted}'`;{sed} or replace each bad byte with "
                f"U+FFFD: `open(path, encoding=\"utf-8\", errors=\"replace\")` and write the text back out. "
                "Then load the cleaned copy.")
    return (f"{path} is not UTF-8: {first} cannot be decoded ({lines}), and it does not read as GBK either. "
            f"Find its encoding (`file -bi '{path}'`), convert it with "
            f"`iconv -f THAT_ENCODING -t UTF-8 '{path}' > '{converted}'` and load the converted copy.")


def json_error_text(err: json.JSONDecodeError, with_line: bool = False) -> str:
    """A JSON parser error in words: ``"Invalid control character at column 48"`` (``"line 3, column 48: ..."``
    with ``with_line``). Python's message for some errors ends in "at" (it expects ``": line 1 column 48"``
    after it), so the place is joined to it once, never as "at at column"."""
    msg = err.msg[:-3] if err.msg.endswith(" at") else err.msg
    if with_line:
        return f"line {err.lineno}, column {err.colno}: {msg}"
    return f"{msg} at column {err.colno}"


def _json_kind(value) -> str:
    """JSON type name of a parsed value (int and float are both "number")."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def locate_json_error(path: Path, encoding: str = "utf-8") -> str | None:
    """Where a JSON file breaks, in words with a 1-based line number, or None.

    ``.jsonl``: the first line that is not valid JSON or not a JSON object;
    if none, the first line whose field has another JSON type than on the
    field's first line (Arrow needs one type per column). ``.json``: the parser's line and column.
    Reads the file line by line (constant memory for ``.jsonl``).
    """
    if path.suffix.lower() == ".json":
        text = path.read_text(encoding=encoding)
        if text.lstrip()[:1] != "[":  # not an array: JSON lines saved as .json
            return _scan_json_lines(path, encoding)
        try:
            json.loads(text)
        except json.JSONDecodeError as err:
            return json_error_text(err, with_line=True)
        return None
    return _scan_json_lines(path, encoding)


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def json_lines(path: Path, encoding: str = "utf-8"):
    """``(line, object, None)`` per JSON Lines record, or ``(line, None, problem)`` for a line that is
    not valid JSON or not an object (blank lines skipped; ``line`` 1-based). Streams the file."""
    with open(path, encoding=encoding) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                yield lineno, None, f"line {lineno} is not valid JSON ({json_error_text(err)})"
                continue
            if not isinstance(row, dict):
                yield lineno, None, (f"line {lineno} is {_a('JSON ' + _json_kind(row))}, "
                                     'not an object like {"text": ..., "label": ...}')
                continue
            yield lineno, row, None


def _scan_json_lines(path: Path, encoding: str) -> str | None:
    """The first invalid or non-object line; else the first field whose JSON type changes."""
    first_kind: dict[str, tuple[str, int]] = {}  # field -> (JSON type, line where first seen)
    type_change = None
    for lineno, row, problem in json_lines(path, encoding):
        if problem:
            return problem
        for key, value in row.items():
            kind = _json_kind(value)
            if kind == "null" or type_change:
                continue
            seen = first_kind.setdefault(key, (kind, lineno))
            if seen[0] != kind:
                type_change = (f"line {lineno}: field {key!r} is {_a(kind)} but {_a(seen[0])} on line "
                               f"{seen[1]}; use one type per field")
    return type_change


def record_lines(path: Path, encoding: str, skipped: list[int] | tuple = ()) -> list[int] | None:
    """The 1-based file line where each record of a labelled file starts, in read order.

    ``.csv``/``.tsv``: after the header, blank lines skipped as pandas does (a quoted field may span
    lines); ``.jsonl``/JSON lines: non-blank lines not in ``skipped`` (lines the reader skipped);
    a ``.json`` array: ``None`` (records have no line of their own; report their 1-based index).
    """
    import csv

    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        lines = []
        with open(path, encoding=encoding, newline="") as fh:
            reader = csv.reader(fh, delimiter="\t" if suffix == ".tsv" else ",")
            start = 1
            for i, record in enumerate(reader):
                if i and record:  # the header; pandas skips empty lines
                    lines.append(start)
                start = reader.line_num + 1
        return lines
    with open(path, encoding=encoding) as fh:
        head = fh.read(4096).lstrip()[:1]
    if suffix == ".json" and head == "[":
        return None
    gone = set(skipped)
    with open(path, encoding=encoding) as fh:
        return [n for n, line in enumerate(fh, start=1) if line.strip() and n not in gone]
