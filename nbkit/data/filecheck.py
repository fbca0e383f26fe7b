"""Diagnose a user's file: is it UTF-8, and if not, which fix fits (GBK, broken lines, UTF-16/32); JSON lines.

One wording of "not UTF-8" (:func:`non_utf8_message`) for every loader and the corpus report.
"""
from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

from nbkit.errors import DataError

_CHUNK = 1 << 20  # 1 MiB read size for the UTF-8 check
_SNIFF = 4096  # bytes inspected for UTF-16/UTF-32 (BOM or NUL bytes)
# after a CR that ends a line on its own (old Mac files): where a binary LF-split line is split again, so lines are
# counted as the text readers (universal newlines) and editors count them
_AFTER_LONE_CR = re.compile(rb"(?<=\r)(?!\n)")

#: byte order mark -> (iconv encoding name, description); UTF-32 first (its LE BOM starts like UTF-16's)
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32", "UTF-32 (little-endian, byte order mark FF FE 00 00)"),
    (codecs.BOM_UTF32_BE, "UTF-32", "UTF-32 (big-endian, byte order mark 00 00 FE FF)"),
    (codecs.BOM_UTF16_LE, "UTF-16", "UTF-16 (little-endian, byte order mark FF FE)"),
    (codecs.BOM_UTF16_BE, "UTF-16", "UTF-16 (big-endian, byte order mark FE FF)"),
)


def sniff_wide_encoding(head: bytes) -> tuple[str, str] | None:
    """``(iconv name, description)`` if ``head`` (a file's first KiB) is UTF-16/UTF-32, else None.

    A byte order mark decides; without one, NUL bytes at odd (LE) or even (BE) offsets mean UTF-16
    (ASCII characters have a zero high byte; UTF-8 and GBK text holds no NUL).
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
    """The codec to read ``path`` with: ``"utf-8-sig"`` after a byte order mark (Excel's "CSV UTF-8"),
    else ``"utf-8"``. Reads 1 MiB chunks (memory flat).

    Raises:
        DataError: UTF-16/UTF-32 (with the ``iconv`` command), or bytes that are not UTF-8
            (:func:`non_utf8_message`).
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
    """An empty scan (keys as :func:`scan_lines`'), filled by :func:`scan_line`."""
    return {"lines": 0, "non_ascii_lines": 0, "utf8_lines": 0, "bad_lines": 0, "bad": [], "gbk": True}


def scan_line(scan: dict, line: bytes, lineno: int, offset: int | None = None, utf8_ok: bool | None = None,
              keep: int = 5) -> None:
    """Count one line (1-based ``lineno``, 0-based byte ``offset`` or None) into ``scan``: the per-line
    rule of every encoding check. ``utf8_ok``: the caller's UTF-8 verdict (None: decode here). GBK is
    tried only while every non-ASCII line so far was GBK."""
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
    """The scan of ``first``'s lines followed by ``then``'s (chunks of one file, in order)."""
    out = {k: first[k] + then[k] for k in ("non_ascii_lines", "utf8_lines", "bad_lines")}
    out.update(lines=max(first["lines"], then["lines"]), gbk=first["gbk"] and then["gbk"],
               bad=[tuple(b) for b in (list(first["bad"]) + list(then["bad"]))[:keep]])
    return out


def scan_lines(path: Path, keep: int = 5) -> dict:
    """Which lines of ``path`` are not UTF-8, in one binary pass; a line ends at LF, CRLF or a lone CR (as the
    loaders read text), so an old Mac file's lines are numbered too.

    Returns ``lines``, ``non_ascii_lines``, ``utf8_lines`` (non-ASCII and valid UTF-8), ``bad_lines``,
    ``bad`` (the first ``keep`` as ``(line 1-based, byte offset 0-based, byte)``), ``gbk`` (every
    non-ASCII line decodes as GBK) and ``cr_lines`` (lines ended by a lone CR; ``sed`` does not see them).
    """
    out = new_scan()
    offset = lineno = cr_lines = 0
    with open(path, "rb") as f:
        for chunk in f:
            for line in _AFTER_LONE_CR.split(chunk) if b"\r" in chunk else (chunk,):
                if not line:
                    continue
                lineno += 1
                cr_lines += line.endswith(b"\r")
                scan_line(out, line, lineno, offset, keep=keep)
                offset += len(line)
    out["cr_lines"] = cr_lines
    return out


def utf8_verdict(scan: dict) -> str:
    """A scan's verdict: ``"gbk"`` (all non-ASCII lines GBK, more fail UTF-8 than pass),
    ``"broken_lines"`` (more pass UTF-8 than fail: converting from GBK would garble them) or ``"unknown"``."""
    if scan["gbk"] and scan["bad_lines"] > scan["utf8_lines"]:
        return "gbk"
    return "broken_lines" if scan["utf8_lines"] >= scan["bad_lines"] else "unknown"


def non_utf8_message(path: Path) -> str:
    """The message that ``path`` is not UTF-8: the first bad byte (``byte 0xNN at offset N (line L)``) and
    the fix for :func:`utf8_verdict`'s case (``iconv -f GBK``; the bad lines and how to drop or replace
    them; or ``file -bi`` to find the encoding)."""
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
    if verdict == "broken_lines":  # sed reads LF-ended lines: its line numbers are not these in an old Mac file
        sed = (" drop the line(s): `sed " + " ".join(f"-e '{b[0]}d'" for b in scan["bad"])
               + f" '{path}' > '{converted}'`;" if scan["bad_lines"] <= len(scan["bad"]) and not scan.get("cr_lines")
               else "")
        return (f"{path} is not UTF-8: {first} cannot be decoded. The file is UTF-8 apart from {lines} "
                f"holding bytes that are not, so converting it from GBK would garble the good lines. Drop the bad "
                f"bytes: `iconv -c -f UTF-8 -t UTF-8 '{path}' > '{converted}'`;{sed} or replace each bad byte with "
                f"U+FFFD: `open(path, encoding=\"utf-8\", errors=\"replace\")` and write the text back out. "
                "Then load the cleaned copy.")
    return (f"{path} is not UTF-8: {first} cannot be decoded ({lines}), and it does not read as GBK either. "
            f"Find its encoding (`file -bi '{path}'`), convert it with "
            f"`iconv -f THAT_ENCODING -t UTF-8 '{path}' > '{converted}'` and load the converted copy.")


def json_error_text(err: json.JSONDecodeError, with_line: bool = False) -> str:
    """``"Invalid control character at column 48"`` (``"line 3, column 48: ..."`` with ``with_line``)."""
    msg = err.msg[:-3] if err.msg.endswith(" at") else err.msg  # some end in "at", never "at at column"
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


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def json_lines(path: Path, encoding: str = "utf-8"):
    """Stream ``(line, object, None)`` per JSON Lines record, or ``(line, None, problem)`` for a line
    that is not a JSON object; ``line`` 1-based, blank lines skipped."""
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


def json_records(path: Path, encoding: str, example: str):
    """``(line, item, record, problem)`` per record: a ``.json`` file holding an array gives its items (``line``
    None, ``item`` 1-based), any other file its JSON lines as :func:`json_lines` (``item`` None).

    Raises:
        DataError: the array does not parse, or an item is not an object (``example`` shows one).
    """
    text = path.read_text(encoding=encoding) if path.suffix.lower() == ".json" else ""
    if text.lstrip()[:1] != "[":
        yield from ((line, None, row, problem) for line, row, problem in json_lines(path, encoding))
        return
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"Could not read {path} as JSON: {json_error_text(err, with_line=True)}. "
                        "Fix that place (a .json file needs an array of objects).") from err
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DataError(f"{path}: item {i} (1-based) of the JSON array is {_a('JSON ' + _json_kind(row))}, not "
                            f"an object like {example}; fix that item.")
        yield None, i, row, None


def array_item_line(text: str, item: int) -> int:
    """The 1-based line of ``text`` (a JSON array that parses) where its ``item``-th (1-based) element starts."""
    decoder, pos = json.JSONDecoder(), text.index("[") + 1
    for _ in range(item - 1):
        pos = decoder.raw_decode(text, _skip_separators(text, pos))[1]
    return text.count("\n", 0, _skip_separators(text, pos)) + 1


def _skip_separators(text: str, pos: int) -> int:
    while text[pos] in " \t\r\n,":
        pos += 1
    return pos


def record_lines(path: Path, encoding: str, skipped: list[int] | tuple = ()) -> list[int] | None:
    """The 1-based line where each record starts: CSV/TSV rows after the header (blank lines skipped as
    pandas does), JSON lines not in ``skipped``; None for a ``.json`` array."""
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
