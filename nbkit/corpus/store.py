"""A prepared corpus directory (format ``nbkit-corpus/1``): its manifest, checked, and its files.

The layout (docs/corpus.md, the writer's contract): ``manifest.json`` written last and
atomically (``"complete": true`` means finished), ``tokenizer/`` (a transformers tokenizer
directory), and per split a list of shards ``shards/<split>-<k:05d>.ids`` (little-endian token
ids of ``manifest["dtype"]``) with ``.wst`` beside each (uint8, 1 where a token starts a word).
The reader relies on nothing else. Every error names the directory and the fix: prepare it
with ``nbkit prepare-corpus`` (or ``nbkit.corpus.prepare_corpus``), which resumes a stopped run.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from nbkit.errors import ConfigError, DataError

FORMAT = "nbkit-corpus/1"
DTYPES = {"uint16": 2, "uint32": 4}          # bytes per token id
_REQUIRED = ("format", "complete", "tokenizer", "dtype", "sep_id", "cls_id", "splits")
_FIX = "prepare it with `nbkit prepare-corpus INPUT... --out {path}` (a stopped preparation resumes)"


def is_prepared(path) -> bool:
    """True when ``path/manifest.json`` exists and says ``"complete": true`` (never raises; a list of
    inputs, a glob or None is simply not a prepared store)."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    try:
        read_manifest(path)
    except DataError:
        return False
    return True


def holds_store_files(folder) -> bool:
    """True when ``folder`` has a store's own files: ``shards/`` beside ``manifest.json`` (finished) or
    ``prepare.json`` (a preparation under way or stopped). Two ``stat`` calls; never raises."""
    folder = Path(folder)
    try:
        return (folder / "shards").is_dir() and any((folder / n).is_file() for n in ("manifest.json", "prepare.json"))
    except OSError:
        return False


def given_store(corpus) -> Path | None:
    """The prepared store ``corpus`` names, or None when it names raw input to prepare.

    ``corpus`` is a path, or a list/tuple of paths (``--corpus A B``, papermill's ``-y 'corpus: [A]'``).
    A store (:func:`is_prepared`) alone, as a path or as the only item of a list, is that store
    (``~`` expanded). Only ``stat`` calls and the manifest are read.

    Raises:
        ConfigError: a store listed with other inputs, or several stores (training reads one store;
            a store is never read as text), naming the stores and the fix.
    """
    items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
    prepared = [is_prepared(i) for i in items]                      # each reads a manifest: once
    stores = [os.fspath(i) for i, yes in zip(items, prepared) if yes]
    if not stores:
        return None
    if len(items) == 1:
        return Path(stores[0]).expanduser()
    others = [os.fspath(i) for i, yes in zip(items, prepared) if not yes]
    raise ConfigError(
        f"the corpus lists the prepared store(s) {stores} together with {others or 'another store'}; a store is "
        "read as it is, never as text, and training reads one store. Pass one store alone (corpus=STORE), or "
        "prepare the raw files together into a new store (their paths are under \"sources\" in each "
        "store's manifest.json)")


def read_manifest(path) -> dict:
    """Read and check ``path/manifest.json`` of a prepared store; return it as a dict.

    Checks: the directory and manifest exist, it is strict JSON with the keys the reader
    needs, ``format == "nbkit-corpus/1"``, ``complete`` is true, ``dtype`` is uint16/uint32,
    every split lists its shards with ``n_tokens``. Only ``stat`` calls, no data read.

    Raises:
        DataError: naming the directory, what is wrong and the fix (run ``nbkit prepare-corpus``).
    """
    from nbkit import jsonio

    path = Path(path).expanduser()
    fix = _FIX.format(path=path)
    if not path.is_dir():
        raise DataError(f"no prepared corpus at {path} (not a directory); {fix}")
    mf = path / "manifest.json"
    if not mf.is_file():
        raise DataError(f"{path} has no manifest.json: it is not a prepared corpus, or its preparation has "
                        f"not finished (the manifest is written last); {fix}")
    try:
        manifest = jsonio.loads_strict(mf.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DataError(f"{mf} is not valid JSON ({err}); delete it and {fix}") from err
    if not isinstance(manifest, dict):
        raise DataError(f"{mf} holds no JSON object; delete it and {fix}")
    if manifest.get("format") != FORMAT:
        raise DataError(f"{path} is in format {manifest.get('format')!r}, this nbkit reads {FORMAT!r}; "
                        f"prepare it again with this nbkit into a new directory ({fix})")
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise DataError(f"{mf} lacks {missing}; {fix}")
    if manifest["complete"] is not True:
        raise DataError(f"{path}: manifest.json says the preparation is not complete; {fix}")
    if manifest["dtype"] not in DTYPES:
        raise DataError(f"{mf}: dtype {manifest['dtype']!r} is not one of {sorted(DTYPES)}; {fix}")
    for name, split in manifest["splits"].items():
        shards = split.get("shards") if isinstance(split, dict) else None
        if not isinstance(shards, list) or any("name" not in s or "n_tokens" not in s for s in shards):
            raise DataError(f"{mf}: split {name!r} does not list its shards with name and n_tokens; {fix}")
    return manifest


def split_shards(path, manifest: dict, split: str) -> list[tuple[Path, Path, int]]:
    """``[(ids_path, wst_path, n_tokens), ...]`` of ``split`` in manifest order, sizes checked.

    Raises:
        DataError: an unknown split (names the ones there), or a shard file missing or
            of the wrong size (a damaged or half-copied store).
    """
    path = Path(path).expanduser()
    if split not in manifest["splits"]:
        raise DataError(f"{path} has no split {split!r}; it has {sorted(manifest['splits'])}")
    width = DTYPES[manifest["dtype"]]
    out = []
    for shard in manifest["splits"][split]["shards"]:
        n = int(shard["n_tokens"])
        ids, wst = path / "shards" / f"{shard['name']}.ids", path / "shards" / f"{shard['name']}.wst"
        for f, size in ((ids, n * width), (wst, n)):
            if not f.is_file() or f.stat().st_size != size:
                got = f.stat().st_size if f.is_file() else "missing"
                raise DataError(f"{f}: expected {size:,} bytes ({n:,} tokens), found {got}: the store is damaged "
                                f"or incompletely copied; copy it again, or {_FIX.format(path=path)}")
        out.append((ids, wst, n))
    return out


def store_tokenizer(path):
    """The store's tokenizer (``transformers.AutoTokenizer`` from ``path/<manifest tokenizer dir>``).

    Raises:
        DataError: the store is not prepared (:func:`read_manifest`).
    """
    from transformers import AutoTokenizer

    manifest = read_manifest(path)
    return AutoTokenizer.from_pretrained(str(Path(path).expanduser() / manifest["tokenizer"]["dir"]))


def wait_for_store(path, timeout_s: float = 6 * 3600.0, poll_s: float = 2.0, clock=time.monotonic,
                   sleep=time.sleep) -> dict:
    """Wait until ``path`` is a complete store (another process prepares it); return its manifest.

    Polls ``manifest.json`` every ``poll_s`` seconds: no process-group collective is
    pending while rank 0 prepares, so no NCCL/gloo timeout can fire however long that takes.

    Raises:
        DataError: not complete after ``timeout_s`` seconds (names the directory, the wait,
            and the fixes: prepare it first, or raise ``--corpus-wait-s``), or complete but invalid.
    """
    deadline = clock() + timeout_s
    while True:
        if (Path(path).expanduser() / "manifest.json").is_file():
            return read_manifest(path)
        if clock() >= deadline:
            raise DataError(f"waited {timeout_s:.0f} s for rank 0 to prepare the corpus store {path}, but "
                            "its manifest.json did not appear; check rank 0's log, or prepare it once with "
                            "`nbkit prepare-corpus` before launching (or raise --corpus-wait-s). Every "
                            "node must see the same directory (a shared filesystem).")
        sleep(poll_s)


# ----- a store for a run: where a raw corpus is prepared, and what went in ---------------------
def store_dir_for(corpus) -> Path:
    """Where a corpus that is not yet prepared gets prepared: ``runs/corpus/<name>-<hash>``.

    The hash is of the inputs as absolute paths (``~`` expanded, relative paths resolved against the
    working directory; glob patterns kept as patterns), so the same files given as ``data/x.jsonl``
    from the shell and as ``/home/me/data/x.jsonl`` from a notebook, at any scale, share one store
    (preparing 2 GB twice costs minutes and GBs); every rank and node given the same ``--corpus``
    computes the same directory (it must be on a shared filesystem).
    """
    import os

    from nbkit import runs

    items = [str(c) for c in (corpus if isinstance(corpus, (list, tuple)) else [corpus])]
    absolute = [os.path.abspath(os.path.expanduser(c)).rstrip("/") for c in items]
    name = Path(absolute[0].rstrip("/*")).name
    return runs.runs_dir() / "corpus" / runs.path_tag(name, "\n".join(absolute), 10, fallback="corpus")


def corpus_store(corpus, out_dir=None, **settings) -> Path:
    """A prepared store for ``corpus``: itself when it already is one, else prepared into ``out_dir``.

    Args:
        corpus: a prepared directory (``manifest.json`` with ``complete: true``), alone or as the
            only item of a list (papermill's ``-y 'corpus: [DIR]'``), or a path, glob, folder or
            list of them for ``nbkit.corpus.prepare_corpus``.
        out_dir: where to prepare (default :func:`store_dir_for`); a finished one is reused
            (the writer checks its inputs and settings).
        settings: passed to ``prepare_corpus`` (``text_field=``, ``num_workers=``, ...).

    Raises:
        DataError / ConfigError: what preparing raises (bad input under ``errors="raise"``, a
            changed input or setting of a finished store, an input that is, holds or lies in a
            store), or a store listed with other inputs (:func:`nbkit.corpus.store.given_store`).
    """
    from nbkit.corpus import prepare_corpus

    store = given_store(corpus)   # a store alone (also as a one-item list) is read as it is, never as text
    if store is not None:
        return store
    out = Path(out_dir) if out_dir is not None else store_dir_for(corpus)
    prepare_corpus(corpus, out, **settings)   # reuses a finished store, names a changed input or setting
    return out


def store_summary(store) -> dict:
    """What went into a prepared store, from its manifest: tokens and documents per split, counts, drops."""
    m = read_manifest(store)
    out = {f"{k}_{name}": v.get(k) for name, v in m["splits"].items() for k in ("n_tokens", "n_docs")}
    out.update({f"dropped_{k}": v for k, v in (m.get("dropped") or {}).items()})
    out.update(vocab_size=m["tokenizer"].get("vocab_size"), tokenizer=m["tokenizer"].get("trained_on"),
               heldout_share=(m.get("heldout") or {}).get("share"), dtype=m["dtype"])
    return out
