"""Per-chunk work of the corpus preparation, run in the worker processes (or in-process for one worker).

For each raw item of a :class:`~nbkit.corpus.readers.Chunk`, in order:

1. decode (UTF-8, strict: a broken line is dropped as ``bad_utf8``; a UTF-8 byte order mark at a line's
   start is ignored; a line holding a NUL byte is dropped as ``nul_byte``) and parse (JSON lines:
   ``bad_json`` when not a JSON object, ``no_text_field`` when the field is absent); a value that is not
   a string is named by its type (:func:`as_text`: ``missing`` for null, ``not_text`` for ``text is int``,
   ``text is a list of 2 str, 1 int``, ...), a list of strings is a document's paragraphs joined with
   ``"\n"`` (``paragraph_lists_joined``), bytes (a binary parquet column) are decoded as UTF-8;
   then MediaWiki markup is stripped when ``strip_markup`` is on (:mod:`nbkit.corpus.wikimarkup`;
   ``markup_stripped``; a text left empty, or a redirect page, is dropped as ``markup_only``);
2. cut a text longer than ``max_chars`` with :func:`nbkit.data.textrule.split_long` (each piece is
   its own text from here on; counted as ``long_texts_cut``);
3. the validity rule :func:`nbkit.data.textrule.check_text` (``missing``, ``blank``,
   ``repaired_surrogates``);
4. the Unicode normalisation the store's tokenizer itself runs first, if any (``settings
   ["unicode_normalization"]``: ``"NFKC"`` for a tokenizer trained with ``nfkc=True``, ``"none"`` for
   nbkit's default and ``bert-base-chinese``: the text is stored as that tokenizer sees it, so the
   table lookup of :mod:`nbkit.corpus.fastpath` gives its ids), then the filters: ``too_short``
   (fewer than ``min_chars`` non-whitespace characters), ``non_cjk`` (CJK ideographs below
   ``min_cjk_share`` of the non-whitespace characters; off at 0);
5. (``encode`` only) the document key :func:`doc_key` (the 64-bit hash of the text after NFKC, whatever
   the tokenizer: width variants count as one text for dedup, held-out split and exclusion), the
   WordPiece ids of the text and the
   word starts aligned to them (:mod:`nbkit.corpus.fastpath`: the segmenter's words, ids by table
   lookup for CJK characters and punctuation, the tokenizer for the rest).

Deduplication and the held-out split need the whole stream's history, so the main process does them
(:mod:`nbkit.corpus.prepare`) from the hashes returned here.
"""
from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter
from typing import Any

import numpy as np

from nbkit.corpus.report import keep_location, locate_mask
from nbkit.corpus.wikimarkup import is_redirect, strip_markup
from nbkit.data.filecheck import json_error_text, new_scan, scan_line
from nbkit.data.textrule import check_text, split_long
from nbkit.errors import DataError

_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")
_WS = re.compile(r"\s+")
_STATE: dict[str, Any] = {}  # per process: the loaded tokenizer and segmenter, keyed by content (see _tools)


def text_hash(text: str) -> int:
    """64-bit hash of ``text`` (blake2b, 8-byte digest, little-endian): deterministic across processes and runs."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def doc_key(text: str) -> int:
    """The identity of a text for dedup, the held-out split and ``exclude_texts``: :func:`text_hash` of its NFKC form.

    NFKC whatever the tokenizer, so ``ＡＢＣ１２３`` and ``ABC123`` are one text (a duplicate) and a
    text's split does not depend on the tokenizer; NFKC is idempotent, so for an NFKC tokenizer this
    is the hash of the stored text.
    """
    return text_hash(unicodedata.normalize("NFKC", text))


def _problem(counts: Counter, problems: list, seen: Counter, errors: str, path: str, line: int, reason: str,
             detail: str):
    counts[reason] += 1
    if errors == "raise":
        raise DataError(f"{path}, line {line}: {reason} ({detail}); fix the line, or pass errors='skip' "
                        "to drop such lines and count them in the manifest")
    keep_location(problems, seen, path, line, reason, detail)


_BOM = b"\xef\xbb\xbf"


def _type_name(value) -> str:
    return "null" if value is None else type(value).__name__


def as_text(value, field: str):
    """A field's value as text, or ``(reason, detail)`` naming what it is instead.

    ``str`` as is; ``bytes`` decoded as UTF-8 (raises ``UnicodeDecodeError``); a list of strings as a list
    (a document's paragraphs: the caller joins them with ``"\n"``); ``None`` -> ``("missing", "text is null")``;
    any other type -> ``("not_text", "text is int")``, ``"text is a list of 2 str, 1 int"``, ``"text is dict
    (keys: [...])"``.
    """
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
    """The raw text value of one item (a list of strings: paragraphs, joined by the caller), or
    ``(reason, detail)`` for a bad line."""
    if isinstance(item, bytes) and kind in ("txt", "jsonl", "json"):
        if item.startswith(_BOM):
            item = item[3:]
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
    """Every raw text of ``inputs``, in order, as ``str``: the corpus formats (``.txt`` lines, JSON lines /
    arrays' ``text_field``, parquet columns; optionally ``.gz``/``.zst``), bad lines and bad files skipped.

    For small files, such as the evaluation texts ``prepare-corpus --exclude`` keeps out of a store:
    :func:`nbkit.corpus.dedup.exclusion_hashes` then cuts, checks and hashes them as corpus texts are.
    Reads each input once; the texts are held only as long as the caller keeps them.

    Raises:
        ConfigError: no input file found (:func:`nbkit.corpus.sources.resolve_inputs`).
    """
    import tempfile

    from nbkit.corpus.readers import Chunk, iter_chunks
    from nbkit.corpus.sources import resolve_inputs

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
    """Steps 1-4 for one chunk: ``(texts, counts, problems, lines, scan)``, texts as stored (step 4), in input order.

    ``counts`` holds drops by reason (exact), repairs and ``n_items`` / ``n_texts_read`` (texts after
    cutting); ``problems`` locates dropped lines, every reason (file and 1-based line; the first
    :data:`nbkit.corpus.report.PER_FILE_REASON` per reason); ``lines`` the 1-based line of each text
    (a long line's pieces share it); ``scan`` the chunk's :func:`nbkit.data.filecheck.scan_line`
    counts (``.txt``/``.jsonl``; None for parquet and JSON arrays), for the file's encoding verdict.

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
    for offset, item in enumerate(chunk.items):
        line = chunk.first_line + offset
        counts["n_items"] += 1
        try:
            value = _value(item, chunk.kind, field)
        except UnicodeDecodeError as exc:
            if scan is not None:
                scan_line(scan, item, line, utf8_ok=False)
            _problem(counts, problems, seen, errors, path, line, "bad_utf8", f"byte {exc.start}: {exc.reason}")
            continue
        if scan is not None and not item.isascii():
            if scan["gbk"]:
                scan_line(scan, item, line, utf8_ok=True)
            else:  # what scan_line would count, without a call per line (most lines of a Chinese corpus)
                utf8 += 1
        if isinstance(value, tuple):
            _problem(counts, problems, seen, errors, path, line, *value)
            continue
        if isinstance(value, list):
            keep_location(problems, seen, path, line, "paragraph_lists_joined",
                          f"{field} is a list of {len(value)} str: joined with \\n as one document's paragraphs")
            value = "\n".join(value)
            counts["paragraph_lists_joined"] += 1
        if markup:
            stripped = strip_markup(value)
            if stripped is not value and stripped != value:
                redirect = is_redirect(value)
                if redirect or (value.strip() and not stripped.strip()):
                    counts["markup_only"] += 1
                    keep_location(problems, seen, path, line, "markup_only",
                                  "a redirect page" if redirect else "only MediaWiki markup, no text")
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
            visible = len(text) - sum(len(m) for m in _WS.findall(text))
            if visible < min_chars:
                counts["too_short"] += 1
                keep_location(problems, seen, path, line, "too_short", f"{visible} visible characters < min_chars "
                              f"{min_chars}")
                continue
            if min_cjk > 0 and len(_CJK.findall(text)) < min_cjk * visible:
                counts["non_cjk"] += 1
                keep_location(problems, seen, path, line, "non_cjk", f"CJK share below min_cjk_share {min_cjk}")
                continue
            texts.append(text)
            lines.append(line)
    if scan is not None:
        scan["non_ascii_lines"] += utf8
        scan["utf8_lines"] += utf8
    return texts, counts, problems, lines, scan


def _tools(settings: dict):
    """``(tokenizer, lookup table, cutter)`` of this process, reloaded when ``tokenizer_json_sha256`` (the
    SHA-256 of ``tokenizer.json``'s bytes, from the parent) or the segmenter differ: keyed by content, not
    by the path, whose file a re-preparation (``overwrite=True`` in one kernel) replaces.

    Raises:
        DataError: the file's bytes do not hash to ``tokenizer_json_sha256`` (it changed during the preparation).
    """
    key = (settings["tokenizer_json_sha256"], settings["segmenter"])
    if _STATE.get("key") != key:
        from tokenizers import Tokenizer

        from nbkit.corpus.fastpath import lookup_table
        from nbkit.corpus.segment import cutter

        path = settings["tokenizer_file"]
        with open(path, "rb") as fh:
            data = fh.read()
        if hashlib.sha256(data).hexdigest() != key[0]:
            raise DataError(f"{path} changed while the corpus was being prepared (its SHA-256 is not the one the "
                            "preparation started with); let one preparation write a store at a time, then run it "
                            "again with overwrite=True")
        _STATE.clear()
        _STATE.update(key=key, tok=Tokenizer.from_str(data.decode("utf-8")), table=lookup_table(path),
                      cut=cutter(settings["segmenter"], keep_space=True))
    return _STATE["tok"], _STATE["table"], _STATE["cut"]


def encode_chunk(chunk, settings: dict, path: str) -> dict[str, Any]:
    """Steps 1-5 for one chunk; returns numpy arrays for the main process.

    Returns:
        ``hashes`` (uint64, n_docs: :func:`doc_key`), ``lens`` (int64, n_docs: tokens per text incl. its ``[SEP]``),
        ``chars`` (int64, n_docs), ``lines`` (int64, n_docs: each text's 1-based line), ``ids`` (``settings["dtype"]``, sum(lens)), ``wst`` (uint8, sum(lens):
        1 at a word's first token and at ``[SEP]``), ``counts`` (Counter), ``problems`` (list), ``scan``
        (:func:`clean_chunk`'s).
        A text that gives no token (every character removed by the tokenizer's normaliser) is
        dropped as ``no_tokens``.
    """
    from nbkit.corpus.fastpath import encode_texts

    texts, counts, problems, lines, scan = clean_chunk(chunk, settings, path)
    tok, table, cut = _tools(settings)
    ids, wst, per_text = encode_texts(texts, tok, table, cut)
    keep = per_text > 0
    counts["no_tokens"] += int((~keep).sum())
    seen = Counter((p["path"], p["reason"]) for p in problems)
    locate_mask(problems, seen, path, "no_tokens", lines, ~keep, "the tokenizer gives it no token")
    lines = np.asarray(lines, dtype=np.int64)
    ends = np.cumsum(per_text)[keep]  # a [SEP] after each kept text's tokens
    dtype = np.dtype(settings["dtype"])
    return {
        "hashes": np.asarray([doc_key(t) for t, k in zip(texts, keep.tolist()) if k], dtype=np.uint64),
        "lens": per_text[keep] + 1,
        "chars": np.asarray([len(t) for t, k in zip(texts, keep.tolist()) if k], dtype=np.int64),
        "lines": lines[keep],
        "ids": np.insert(ids, ends, settings["sep_id"]).astype(dtype),
        "wst": np.insert(wst, ends, 1).astype(np.uint8),
        "counts": counts, "problems": problems, "scan": scan,
    }


def run(task: tuple) -> Any:
    """Pool entry point: ``(mode, chunk, settings, path)`` -> :func:`clean_chunk` or :func:`encode_chunk`."""
    mode, chunk, settings, path = task
    return (encode_chunk if mode == "encode" else clean_chunk)(chunk, settings, path)
