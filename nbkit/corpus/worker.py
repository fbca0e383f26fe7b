"""Per-chunk work of the corpus preparation, in the worker processes (docs/corpus.md, "What happens to each
text"): decode and parse, strip markup, cut long texts, the validity rule, the tokenizer's own normalisation,
the filters; then the document key, ids and word starts. Dedup and the held-out split need the whole stream:
the main process does them from the hashes returned here.
"""
from __future__ import annotations

import codecs
import hashlib
import json
import re
import tempfile
import unicodedata
from collections import Counter
from typing import Any

import numpy as np

from nbkit.corpus import fastpath
from nbkit.corpus.readers import Chunk, iter_chunks
from nbkit.corpus.report import keep_location, locate_mask
from nbkit.corpus.segment import cutter
from nbkit.corpus.sources import resolve_inputs
from nbkit.corpus.wikimarkup import is_redirect, strip_markup
from nbkit.data.filecheck import json_error_text, new_scan, scan_line
from nbkit.data.textrule import check_text, split_long
from nbkit.errors import DataError

#: Runs of CJK ideographs (the ``min_cjk_share`` filter counts their characters, one match per run).
_CJK_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]+")
#: Characters :func:`doc_key` maps to their NFKD form before NFKC: full-width ASCII, the ideographic space and
#: the ellipsis, which nearly every Chinese text holds. A full decomposition is idempotent, so this never changes
#: ``NFKC(s)``, and most texts then pass ``normalize``'s quick check.
_WIDE = re.compile("[\uff01-\uff5e\u3000\u2026]")
_WIDE_NFKD = {chr(c): unicodedata.normalize("NFKD", chr(c)) for c in [*range(0xFF01, 0xFF5F), 0x3000, 0x2026]}
_STATE: dict[str, Any] = {}  # per process: the loaded tokenizer and segmenter, keyed by content (see _tools)


def doc_key(text: str) -> int:
    """A text's identity for dedup, the held-out split and ``exclude_texts``: blake2b-64 (little-endian) of
    its NFKC form, whatever the tokenizer, so ``ＡＢＣ１２３`` and ``ABC123`` are one text."""
    if _WIDE.search(text):
        text = _WIDE.sub(lambda m: _WIDE_NFKD[m.group()], text)   # the same NFKC form (see _WIDE), found faster
    nfkc = unicodedata.normalize("NFKC", text).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(nfkc, digest_size=8).digest(), "little")


def _type_name(value) -> str:
    return "null" if value is None else type(value).__name__


def as_text(value, field: str):
    """A field's value as text (``bytes`` decoded as UTF-8, may raise ``UnicodeDecodeError``), a list of
    strings (a document's paragraphs), or ``(reason, detail)``: ``("missing", "text is null")``,
    ``("not_text", "text is int")``, ``"text is a list of 2 str, 1 int"``, ``"text is dict (keys: [...])"``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if value is None or (isinstance(value, float) and value != value):
        return ("missing", f"{field} is {'null' if value is None else 'NaN'}")
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) for v in value):
            return list(value)
        kinds = Counter(_type_name(v) for v in value)
        parts = ", ".join(f"{n} {k}" for k, n in kinds.most_common())
        return ("not_text", f"{field} is {'an empty list' if not value else f'a list of {parts}'}")
    if isinstance(value, dict):
        return ("not_text", f"{field} is dict (keys: {sorted(map(str, value))[:5]})")
    return ("not_text", f"{field} is {_type_name(value)}")


def _value(item, kind: str, field: str):
    """One item's raw text value (a list of strings: paragraphs), or ``(reason, detail)`` for a bad line."""
    if isinstance(item, bytes) and kind in ("txt", "jsonl", "json"):
        item = item.removeprefix(codecs.BOM_UTF8)
        nul = item.find(0)
        if nul >= 0:
            return ("nul_byte", f"a NUL byte at byte {nul + 1} of the line")
    if kind == "txt":
        return item.decode("utf-8")
    if kind in ("jsonl", "json"):
        if isinstance(item, bytes):
            line = item.decode("utf-8")
            if not line.strip():
                return ""  # a blank line of a JSON lines file: dropped as "blank" by check_text
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                return ("bad_json", json_error_text(exc))
        if not isinstance(item, dict):
            return ("bad_json", f"a JSON {type(item).__name__}, not an object")
        if field not in item:
            return ("no_text_field", f"no {field!r} key; keys: {sorted(item)[:5]}")
        item = item[field]
    return as_text(item, field)  # JSON's field, a parquet or datasets column's value


def iter_texts(inputs, text_field: str = "text"):
    """Every raw text of ``inputs`` in order (the corpus formats; bad lines and files skipped), streamed: for
    the evaluation texts ``prepare-corpus --exclude`` keeps out of a store.

    Raises:
        ConfigError: no input file found (:func:`nbkit.corpus.sources.resolve_inputs`).
    """
    sources = resolve_inputs(inputs)
    with tempfile.TemporaryDirectory(prefix="nbkit-texts-") as tmp:
        for chunk in iter_chunks(sources, text_field, tmp_dir=tmp):
            if not isinstance(chunk, Chunk):
                continue
            for item in chunk.items:
                try:
                    value = _value(item, chunk.kind, text_field)
                except UnicodeDecodeError:
                    continue
                if isinstance(value, list):
                    value = "\n".join(value)
                if isinstance(value, str):
                    yield value


def clean_chunk(chunk, settings: dict, path: str) -> tuple[list[str], Counter, list[dict], list[int], dict | None]:
    """Clean one chunk: ``(texts as stored, counts, problems, lines, scan)``, in input order.

    ``counts``: drops by reason (exact), repairs, ``n_items``, ``n_texts_read``; ``problems``: the first
    located drops per reason; ``lines``: each text's 1-based line; ``scan``: the chunk's
    :func:`nbkit.data.filecheck.scan_line` counts (None for parquet and JSON arrays).

    Raises:
        DataError: a bad line when ``settings["errors"] == "raise"``.
    """
    counts: Counter = Counter()
    problems: list[dict] = []
    seen: Counter = Counter()
    errors, field, max_chars = settings["errors"], settings["text_field"], settings["max_chars"]
    min_chars, min_cjk = settings["min_chars"], settings["min_cjk_share"]
    if min_cjk == "auto":   # per source: the Wikipedia dumps' share (nbkit.corpus.manifest.WIKI_CJK_SHARE), else off
        min_cjk = settings["cjk_share_by_source"].get(chunk.source, 0.0)
    form = settings["unicode_normalization"]
    form = None if form == "none" else form
    markup = settings.get("strip_markup", False)
    scan = new_scan() if chunk.kind in ("txt", "jsonl") else None
    texts, lines, utf8 = [], [], 0  # utf8: non-ASCII UTF-8 lines once the scan's GBK check has failed

    def note(reason: str, detail: str, bad_line: bool = False) -> None:   # count and locate it at this line
        if bad_line and errors == "raise":
            raise DataError(f"{path}, line {line}: {reason} ({detail}); fix the line, or pass errors='skip' "
                            "to drop such lines and count them in the manifest")
        counts[reason] += 1
        keep_location(problems, seen, path, line, reason, detail)

    for offset, item in enumerate(chunk.items):
        line = chunk.first_line + offset
        counts["n_items"] += 1
        try:
            value = _value(item, chunk.kind, field)
        except UnicodeDecodeError as exc:
            if scan is not None:
                scan_line(scan, item, line, utf8_ok=False)
            note("bad_utf8", f"byte {exc.start}: {exc.reason}", bad_line=True)
            continue
        if scan is not None and not item.isascii():
            if scan["gbk"]:
                scan_line(scan, item, line, utf8_ok=True)
            else:  # what scan_line would count, without a call per line (most lines of a Chinese corpus)
                utf8 += 1
        if isinstance(value, tuple):
            note(*value, bad_line=True)
            continue
        if isinstance(value, list):
            note("paragraph_lists_joined", f"{field} is a list of {len(value)} str: joined with \\n as one document's "
                 "paragraphs")
            value = "\n".join(value)
        if markup:
            stripped = strip_markup(value)
            if stripped is not value and stripped != value:
                redirect = is_redirect(value)
                if redirect or (value.strip() and not stripped.strip()):
                    note("markup_only", "a redirect page" if redirect else "only MediaWiki markup, no text")
                    continue
                counts["markup_stripped"] += 1
                value = stripped
        pieces = [value]
        if isinstance(value, str) and len(value) > max_chars:
            pieces = split_long(value, max_chars)
            counts["long_texts_cut"] += 1
            counts["long_text_pieces"] += len(pieces)
        for piece in pieces:
            counts["n_texts_read"] += 1
            text = check_text(piece, counts)
            if text is None:  # counted by check_text: "missing" for a non-string value, else "blank"
                keep_location(problems, seen, path, line, "blank" if isinstance(piece, str) else "missing")
                continue
            if form:
                text = unicodedata.normalize(form, text)
            visible = sum(map(len, text.split()))   # str.split's whitespace is re's \s (str.isspace)
            if visible < min_chars:
                note("too_short", f"{visible} visible characters < min_chars {min_chars}")
                continue
            if min_cjk > 0 and sum(map(len, _CJK_RUN.findall(text))) < min_cjk * visible:
                note("non_cjk", f"CJK share below min_cjk_share {min_cjk}")
                continue
            texts.append(text)
            lines.append(line)
    if scan is not None:
        scan["non_ascii_lines"] += utf8
        scan["utf8_lines"] += utf8
    return texts, counts, problems, lines, scan


def _tools(settings: dict):
    """``(tokenizer, lookup table, cutter, continuation mask)`` of this process, keyed by ``tokenizer.json``'s
    SHA-256 and the segmenter, not by its path (``overwrite=True`` in one kernel replaces the file).

    Raises:
        DataError: the file no longer hashes to ``tokenizer_json_sha256`` (changed during the preparation).
    """
    key = (settings["tokenizer_json_sha256"], settings["segmenter"])
    if _STATE.get("key") != key:
        from tokenizers import Tokenizer

        path = settings["tokenizer_file"]
        with open(path, "rb") as fh:
            data = fh.read()
        if hashlib.sha256(data).hexdigest() != key[0]:
            raise DataError(f"{path} changed while the corpus was being prepared (its SHA-256 is not the one the "
                            "preparation started with); let one preparation write a store at a time, then run it "
                            "again with overwrite=True")
        _STATE.clear()
        _STATE.update(key=key, tok=Tokenizer.from_str(data.decode("utf-8")), table=fastpath.lookup_table(path),
                      cut=cutter(settings["segmenter"], keep_space=True), cont=fastpath.continuation_mask(path))
    return _STATE["tok"], _STATE["table"], _STATE["cut"], _STATE["cont"]


def encode_chunk(chunk, settings: dict, path: str) -> dict[str, Any]:
    """Clean and encode one chunk (``n``: texts kept, ``t``: their tokens; a text with no token is ``no_tokens``).

    Returns:
        ``hashes`` (n,) uint64 :func:`doc_key`; ``lens`` (n,) int64 tokens incl. ``[SEP]``; ``chars`` (n,);
        ``lines`` (n,); ``ids`` (t,) of ``settings["dtype"]``; ``wst`` (t,) uint8, 1 at a word's first token
        and at ``[SEP]``; ``counts``, ``problems``, ``scan`` as :func:`clean_chunk`'s.
    """
    texts, counts, problems, lines, scan = clean_chunk(chunk, settings, path)
    tok, table, cut, cont = _tools(settings)
    ids, wst, per_text = fastpath.encode_texts(texts, tok, table, cut, cont)
    keep = per_text > 0
    counts["no_tokens"] += int((~keep).sum())
    seen = Counter((p["path"], p["reason"]) for p in problems)
    locate_mask(problems, seen, path, "no_tokens", lines, ~keep, "the tokenizer gives it no token")
    ends = np.cumsum(per_text)[keep]  # a [SEP] after each kept text's tokens
    kept = [t for t, k in zip(texts, keep.tolist()) if k]
    return {
        "hashes": np.asarray([doc_key(t) for t in kept], dtype=np.uint64),
        "lens": per_text[keep] + 1,
        "chars": np.asarray([len(t) for t in kept], dtype=np.int64),
        "lines": np.asarray(lines, dtype=np.int64)[keep],
        "ids": np.insert(ids, ends, settings["sep_id"]).astype(settings["dtype"]),
        "wst": np.insert(wst, ends, 1).astype(np.uint8),
        "counts": counts, "problems": problems, "scan": scan,
    }


def run(task: tuple) -> Any:
    """Pool entry point: ``(mode, chunk, settings, path)`` -> :func:`clean_chunk` or :func:`encode_chunk`."""
    mode, chunk, settings, path = task
    return (encode_chunk if mode == "encode" else clean_chunk)(chunk, settings, path)
