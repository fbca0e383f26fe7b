"""Settings of a corpus preparation, the store's identity (settings + sources), and ``manifest.json``.

A store is identified by its settings and by each source's path, size and modification time.
``prepare.json`` holds that identity from the first moment of a preparation; ``manifest.json``
(format ``nbkit-corpus/1``, see ``docs/corpus.md``) repeats it when the store is complete. A rerun
compares them with the new call and names every difference (:func:`differences`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nbkit.errors import ConfigError

FORMAT = "nbkit-corpus/1"

#: Every preparation setting and its default (docs/corpus.md explains each).
DEFAULTS: dict[str, Any] = {
    "text_field": "text",      # JSON key / parquet column holding the text
    "tokenizer": None,         # a tokenizer directory to use as is; None: train one on the sample
    "vocab_size": 21128,       # WordPiece target size when training (bert-base-chinese's size)
    "model_max_length": 512,   # the trained tokenizer's model_max_length
    "sample_mb": 16.0,         # MB (UTF-8) of kept training texts the tokenizer is trained on
    "min_chars": 5,            # fewer non-whitespace characters: dropped as too_short
    "min_cjk_share": 0.0,      # below this share of CJK ideographs: dropped as non_cjk (0: off)
    "max_chars": 20000,        # longer texts are cut at sentence ends into pieces of at most this
    "heldout_share": 0.005,    # share of texts (by hash) in the validation split
    "shard_tokens": 1 << 25,   # a part closes once its train shard holds at least this many tokens
    "chunk_items": 1000,       # lines per unit of work (also bounded by 4 MB)
    "segmenter": "auto",       # rjieba if installed, else jieba
    "errors": "skip",          # bad lines: "skip" (count and name them) or "raise" (DataError)
    "exclude_texts": None,     # texts never stored (e.g. evaluation texts); the manifest keeps only
                               # {"n_hashes", "sha256"} of their sorted hashes (nbkit.corpus.dedup)
}
#: Settings that do not change the output (not compared on a rerun).
RUNTIME = ("num_workers", "progress", "overwrite")


def check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in and each value checked; returns the full settings dict.

    Raises:
        ConfigError: an unknown setting or a value out of range (the message names the range).
    """
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown prepare_corpus setting(s) {unknown}; known: {sorted(DEFAULTS)}")
    s = {**DEFAULTS, **settings}
    if s["errors"] not in ("skip", "raise"):
        raise ConfigError(f"errors={s['errors']!r}: use 'skip' (count bad lines) or 'raise'")
    if not 0.0 <= float(s["heldout_share"]) < 1.0:
        raise ConfigError(f"heldout_share={s['heldout_share']} must be in [0, 1), e.g. 0.005")
    if not 0.0 <= float(s["min_cjk_share"]) <= 1.0:
        raise ConfigError(f"min_cjk_share={s['min_cjk_share']} must be in [0, 1] (0 turns the filter off)")
    for key, low in (("min_chars", 0), ("max_chars", 16), ("shard_tokens", 1), ("chunk_items", 1),
                     ("vocab_size", 6), ("model_max_length", 3)):
        if not isinstance(s[key], int) or s[key] < low:
            raise ConfigError(f"{key}={s[key]!r} must be a whole number >= {low}")
    if float(s["sample_mb"]) <= 0:
        raise ConfigError(f"sample_mb={s['sample_mb']} must be > 0 (MB of text to train the tokenizer on)")
    if s["tokenizer"] is not None:
        s["tokenizer"] = str(Path(os.fspath(s["tokenizer"])).expanduser().resolve())
    return s


def identity(settings: dict[str, Any], sources: list[dict[str, Any]]) -> dict[str, Any]:
    """What a store is prepared from: ``{"format", "settings", "sources"}`` (the content of ``prepare.json``)."""
    return {"format": FORMAT, "settings": settings, "sources": sources}


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two identities (empty when the same store would result)."""
    out = []
    if old.get("format") != new["format"]:
        out.append(f"format {old.get('format')} -> {new['format']}")
    o_set, n_set = old.get("settings", {}), new["settings"]
    for key in sorted(set(o_set) | set(n_set)):
        if o_set.get(key) != n_set.get(key):
            out.append(f"setting {key}: {o_set.get(key)!r} -> {n_set.get(key)!r}")
    o_src = {s["path"]: s for s in old.get("sources", [])}
    n_src = {s["path"]: s for s in new["sources"]}
    for path in n_src:
        if path not in o_src:
            out.append(f"input added: {path}")
            continue
        for key, unit in (("size_bytes", " bytes"), ("mtime", " (modification time)")):
            if o_src[path].get(key) != n_src[path][key]:
                out.append(f"input changed: {path} {key} {o_src[path].get(key)} -> {n_src[path][key]}{unit}")
    out += [f"input removed: {p}" for p in o_src if p not in n_src]
    if not out and [s["path"] for s in old.get("sources", [])] != list(n_src):
        out.append("input order changed")
    return out


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
    import nbkit

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
        "tokenizer": {k: tokenizer[k] for k in ("dir", "vocab_size", "trained_on")},
        "dtype": tokenizer["dtype"], "sep_id": tokenizer["sep_id"], "cls_id": tokenizer["cls_id"],
        "splits": splits,
        "heldout": {"share": share, "rule": (
            "validation when blake2b-64 (8-byte digest, little-endian integer h) of the NFKC-normalised "
            f"text satisfies h < share * 2**64, i.e. h < {int(share * 2**64)}; the same text always goes "
            "to the same split, whatever the run, the order or the other texts")},
        "counts": last["counts"], "dropped": last["dropped"], "repaired": last["repaired"],
        "problems": last["problems"], "timing": timing,
    }
