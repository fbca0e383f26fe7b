"""A preparation's settings (defaults, checks), the store's identity (settings + sources: path, size, content)
and ``manifest.json``. ``prepare.json`` holds the identity from a preparation's start; a rerun names every
difference from it (:func:`differences`), a touched input (same size, new time) only if its SHA-256 differs.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import nbkit
from nbkit.corpus.sources import fingerprint
from nbkit.corpus.store import FORMAT
from nbkit.errors import ConfigError, DataError

#: Every preparation setting and its default (docs/corpus.md explains each).
DEFAULTS: dict[str, Any] = {
    "text_field": "text",      # JSON key / parquet column holding the text
    "tokenizer": None,         # a tokenizer directory to use as is; None: train one on the sample
    "vocab_size": 21128,       # WordPiece target size when training (bert-base-chinese's size)
    "model_max_length": 512,   # the trained tokenizer's model_max_length
    "sample_mb": 16.0,         # MB (UTF-8) of kept training texts the tokenizer is trained on
    "min_chars": 5,            # fewer non-whitespace characters: dropped as too_short
    "min_cjk_share": "auto",   # below this share of CJK ideographs (of the visible characters): dropped as
                               # non_cjk (0: off); "auto": WIKI_CJK_SHARE for a Wikipedia dump's texts, off for others
    "strip_markup": True,      # strip MediaWiki markup (nbkit.corpus.wikimarkup); a text without any is unchanged
    "max_chars": 20000,        # longer texts are cut at sentence ends into pieces of at most this
    "heldout_share": 0.005,    # share of texts (by hash) in the validation split
    "shard_tokens": 1 << 25,   # a part closes once its train shard holds at least this many tokens
    "chunk_items": 1000,       # lines per unit of work (also bounded by 4 MB)
    "segmenter": "auto",       # rjieba if installed, else jieba
    "errors": "skip",          # bad lines: "skip" (count and name them) or "raise" (DataError)
    "exclude_texts": None,     # texts never stored (e.g. evaluation texts); the manifest keeps only
                               # {"n_hashes", "sha256"} of their sorted hashes (nbkit.corpus.prepare)
}
#: ``min_cjk_share="auto"`` for a Wikipedia dump's texts (zhwiki prose: 0.35-0.55; English, list and table pages
#: fall below); off elsewhere, where it would drop real text (docs/corpus.md, step 4).
WIKI_CJK_SHARE = 0.1
#: Settings that only shape the tokenizer a store trains: ``None`` (not applicable) with a given tokenizer.
TRAINED_ONLY = ("vocab_size", "sample_mb", "model_max_length")


def check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The full settings, defaults filled in and each value checked. With ``tokenizer`` given,
    :data:`TRAINED_ONLY` become ``None`` (no part of the identity); one passed explicitly warns that it is ignored.

    Raises:
        ConfigError: an unknown setting or a value out of range (the range named).
    """
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown prepare_corpus setting(s) {unknown}; known: {sorted(DEFAULTS)}")
    s = {**DEFAULTS, **settings}
    if s["tokenizer"] is not None:
        ignored = {k: settings[k] for k in TRAINED_ONLY if settings.get(k) is not None}
        if ignored:
            warnings.warn(
                f"{', '.join(f'{k}={v!r}' for k, v in ignored.items())} ignored: "
                f"{'it shapes' if len(ignored) == 1 else 'they shape'} only a tokenizer the store trains, and "
                f"tokenizer={s['tokenizer']!r} is given (its own vocabulary is used; the store records "
                f"{', '.join(ignored)} as null). Leave {'it' if len(ignored) == 1 else 'them'} out to silence "
                "this.", UserWarning, stacklevel=3)
        s.update(dict.fromkeys(TRAINED_ONLY))
    if not isinstance(s["strip_markup"], bool):
        raise ConfigError(f"strip_markup={s['strip_markup']!r} must be True (strip MediaWiki markup) or False")
    if not isinstance(s["text_field"], str) or not s["text_field"]:
        raise ConfigError(f"text_field={s['text_field']!r} must be the name of the text key or column, e.g. 'text'")
    if s["errors"] not in ("skip", "raise"):
        raise ConfigError(f"errors={s['errors']!r}: use 'skip' (count bad lines) or 'raise'")
    if not 0.0 <= float(s["heldout_share"]) < 1.0:
        raise ConfigError(f"heldout_share={s['heldout_share']} must be in [0, 1), e.g. 0.005")
    cjk = s["min_cjk_share"]
    if cjk != "auto" and (isinstance(cjk, (bool, str)) or not 0.0 <= float(cjk) <= 1.0):
        raise ConfigError(f"min_cjk_share={cjk!r} must be in [0, 1] (0 turns the filter off) or 'auto' "
                          f"({WIKI_CJK_SHARE} for a Wikipedia dump's texts, off for others)")
    for key, low in (("min_chars", 0), ("max_chars", 16), ("shard_tokens", 1), ("chunk_items", 1),
                     ("vocab_size", 6), ("model_max_length", 3)):
        if key in TRAINED_ONLY and s["tokenizer"] is not None:
            continue
        if not isinstance(s[key], int) or s[key] < low:
            raise ConfigError(f"{key}={s[key]!r} must be a whole number >= {low}")
    if s["sample_mb"] is not None and float(s["sample_mb"]) <= 0:
        raise ConfigError(f"sample_mb={s['sample_mb']} must be > 0 (MB of text to train the tokenizer on)")
    if s["tokenizer"] is not None:
        s["tokenizer"] = str(Path(os.fspath(s["tokenizer"])).expanduser().resolve())
    return s


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Differences between a recorded identity ``old`` and the call's ``new``, in words (empty: the same store).

    A source of equal size and a new modification time is read once and its SHA-256 compared. With a given
    tokenizer the :data:`TRAINED_ONLY` settings are not compared, nor its folder where both record the same
    ``tokenizer_sha256`` (a copy of the checkpoint, e.g. its fp16 twin, tokenizes alike: the store is reused).
    """
    out = []
    if old.get("format") != new["format"]:
        out.append(f"format {old.get('format')} -> {new['format']}")
    o_set, n_set = old.get("settings", {}), new["settings"]
    skip = TRAINED_ONLY if n_set.get("tokenizer") is not None else ()
    if n_set.get("tokenizer_sha256") and o_set.get("tokenizer_sha256") == n_set.get("tokenizer_sha256"):
        skip = (*skip, "tokenizer")
    for key in sorted(set(o_set) | set(n_set)):
        if key not in skip and o_set.get(key) != n_set.get(key):
            out.append(f"setting {key}: {o_set.get(key)!r} -> {n_set.get(key)!r}")
    o_src = {s["path"]: s for s in old.get("sources", [])}
    n_src = {s["path"]: s for s in new["sources"]}
    for path in n_src:
        if path not in o_src:
            out.append(f"input added: {path}")
        elif o_src[path].get("size_bytes") != n_src[path]["size_bytes"]:
            out.append(f"input changed: {path} size_bytes {o_src[path].get('size_bytes')} -> "
                       f"{n_src[path]['size_bytes']} bytes")
        elif o_src[path].get("mtime") != n_src[path]["mtime"]:
            out += _content_change(o_src[path], n_src[path])
    out += [f"input removed: {p}" for p in o_src if p not in n_src]
    if not out and [s["path"] for s in old.get("sources", [])] != list(n_src):
        out.append("input order changed")
    return out


def _content_change(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``[]`` when a touched source (same size, new time) still has the recorded SHA-256, else its line."""
    path, when = new["path"], f"modification time {old.get('mtime')} -> {new['mtime']}"
    if not old.get("sha256"):
        return [f"input changed: {path} {when} (this store records no content fingerprint, as nbkit before "
                f"content checks wrote it, so a touched or copied file cannot be told from an edited one; "
                f"if its content is the one prepared, `touch -d @{old.get('mtime')} {path}` restores the time)"]
    try:
        now = fingerprint(path)
    except OSError as exc:
        return [f"input changed: {path} {when}, and it cannot be read to compare its content ({exc})"]
    if now == old["sha256"]:
        return []
    return [f"input changed: {path} content (sha256 {old['sha256'][:12]}... -> {now[:12]}..., same size, {when})"]


def with_fingerprints(ident: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """``ident`` with each source's ``sha256``: the one ``old`` recorded for its path, else computed now."""
    known = {s["path"]: s.get("sha256") for s in (old or {}).get("sources", [])}
    sources = [s if s.get("kind") == "dataset" else {**s, "sha256": known.get(s["path"]) or fingerprint(s["path"])}
               for s in ident["sources"]]   # a datasets object's identity is its fingerprint, set already
    return {**ident, "sources": sources}


class DamagedStore(DataError):
    """A JSON file nbkit wrote into a store does not parse as an object; ``why`` says which, without the fix."""

    def __init__(self, why: str):
        super().__init__(f"{why}. Pass overwrite=True to delete nbkit's files there and prepare again, or a new "
                         "out_dir")
        self.why = why


def read_store_json(path: Path, out_dir: Path) -> dict[str, Any]:
    """The JSON object in ``path``, a file nbkit wrote into the store ``out_dir`` (``manifest.json``,
    ``prepare.json``, ``tokenizer_info.json``).

    Raises:
        DamagedStore: it is not valid JSON, or not an object (the store is damaged; the fix named).
    """
    from nbkit import jsonio

    try:
        value = jsonio.loads_strict(Path(path).read_text(encoding="utf-8"))
        if not isinstance(value, dict):
            raise ValueError(f"a JSON {type(value).__name__}, not an object")
    except (ValueError, UnicodeDecodeError) as err:
        raise DamagedStore(f"{path} is not valid JSON ({str(err)[:120]}): the store in {out_dir} is damaged") from None
    return value


def changed_error(out_dir: Path, diffs: list[str], complete: bool) -> ConfigError:
    """The error for a rerun whose input or settings differ from the store in ``out_dir``."""
    what = "a complete store" if complete else "a partly prepared store"
    return ConfigError(
        f"{out_dir} holds {what} prepared from other input or settings: " + "; ".join(diffs[:10])
        + (f" (and {len(diffs) - 10} more)" if len(diffs) > 10 else "")
        + ". Pass a new out_dir, or overwrite=True to delete it and prepare again.")


def build_manifest(ident: dict[str, Any], last: dict[str, Any], markers: list[dict[str, Any]],
                   tokenizer: dict[str, Any], timing: dict[str, Any]) -> dict[str, Any]:
    """``manifest.json``'s content from the identity, the last part's cumulative state and every part's shards."""
    splits = {}
    for split in ("train", "validation"):
        shards = [{k: m["shards"][split][k] for k in ("name", "n_tokens", "n_docs")}
                  for m in markers if m["shards"].get(split)]
        splits[split] = {"shards": shards, "n_tokens": sum(s["n_tokens"] for s in shards),
                         "n_docs": sum(s["n_docs"] for s in shards)}
    share = ident["settings"]["heldout_share"]
    return {
        "format": FORMAT, "complete": True, "nbkit_version": nbkit.__version__,
        "settings": ident["settings"], "sources": ident["sources"],
        "tokenizer": {k: tokenizer.get(k) for k in ("dir", "vocab_size", "vocab_size_asked", "trained_on", "note")},
        "dtype": tokenizer["dtype"], "sep_id": tokenizer["sep_id"], "cls_id": tokenizer["cls_id"],
        "splits": splits,
        "heldout": {"share": share, "rule": (
            "validation when blake2b-64 (8-byte digest, little-endian integer h) of the NFKC-normalised "
            f"text satisfies h < share * 2**64, i.e. h < {int(share * 2**64)}; the same text always goes "
            "to the same split, whatever the run, the order or the other texts")},
        "counts": last["counts"], "dropped": last["dropped"], "repaired": last["repaired"],
        "problems": last["problems"], "timing": timing,
    }
