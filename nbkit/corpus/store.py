"""A prepared store (format ``nbkit-corpus/1``, docs/corpus.md) as the reader sees it: ``manifest.json`` checked,
its shard files, its tokenizer, waiting for another rank to prepare it, the folder a corpus input is prepared into
(keyed by the input's identity) and the store a run trains from. Every
error names the directory and the fix (``nbkit prepare-corpus``, which resumes).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from nbkit import jsonio, runs
from nbkit.errors import ConfigError, DataError

FORMAT = "nbkit-corpus/1"
DTYPES = {"uint16": 2, "uint32": 4}          # bytes per token id
_REQUIRED = ("format", "complete", "tokenizer", "dtype", "sep_id", "cls_id", "splits")
_FIX = "prepare it with `nbkit prepare-corpus INPUT... --out {path}` (a stopped preparation resumes)"


def is_prepared(path) -> bool:
    """True when ``path/manifest.json`` says ``"complete": true``; never raises (a list, a glob, None: False)."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    try:
        read_manifest(path)
    except DataError:
        return False
    return True


def holds_store_files(folder) -> bool:
    """True when ``folder`` holds ``shards/`` beside ``manifest.json`` or ``prepare.json`` (a store, finished or
    not); never raises."""
    folder = Path(folder)
    try:
        return (folder / "shards").is_dir() and any((folder / n).is_file() for n in ("manifest.json", "prepare.json"))
    except OSError:
        return False


def given_store(corpus) -> Path | None:
    """The store ``corpus`` names (a path, or a list or tuple holding only it; ``~`` expanded), or None for raw input.

    Raises:
        ConfigError: a store listed with other inputs, or several stores (training reads one store).
        DataError: a store alone whose ``manifest.json`` is damaged (:func:`read_manifest`'s message).
    """
    items = list(corpus) if isinstance(corpus, (list, tuple)) else [corpus]
    prepared = [is_prepared(i) for i in items]                      # each reads a manifest: once
    stores = [os.fspath(i) for i, yes in zip(items, prepared) if yes]
    if not stores:
        one = Path(os.fspath(items[0])).expanduser() if len(items) == 1 and isinstance(items[0], (str, os.PathLike)) \
            else None
        if one is not None and (one / "manifest.json").is_file() and holds_store_files(one):
            read_manifest(one)   # a store with a damaged manifest: its DataError names the file and the fix
        return None
    if len(items) == 1:
        return Path(stores[0]).expanduser()
    others = [str(i) for i, yes in zip(items, prepared) if not yes]
    raise ConfigError(
        f"the corpus lists the prepared store(s) {stores} together with {others or 'another store'}; a store is read "
        "as it is, never as text, and training reads one store. Pass one store alone (corpus=STORE), or prepare the "
        "raw files together into a new store (their paths are under \"sources\" in each store's manifest.json)")


def read_manifest(path) -> dict:
    """``path/manifest.json`` of a prepared store, checked (strict JSON, format, ``complete``, dtype, each split's
    shards); no data read.

    Raises:
        DataError: what is wrong, the directory and the fix.
    """
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
        DataError: an unknown split (the ones there named), or a shard missing or of the wrong size.
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
    """The store's tokenizer (``transformers.AutoTokenizer``).

    Raises:
        DataError: the store is not prepared (:func:`read_manifest`).
    """
    from transformers import AutoTokenizer

    manifest = read_manifest(path)
    return AutoTokenizer.from_pretrained(str(Path(path).expanduser() / manifest["tokenizer"]["dir"]))


def wait_for_store(path, timeout_s: float = 6 * 3600.0, poll_s: float = 2.0, clock=time.monotonic,
                   sleep=time.sleep, fresh: bool = False) -> dict:
    """The manifest of ``path`` once another process (rank 0) completes it, polled every ``poll_s`` seconds: no
    collective is pending meanwhile, so no NCCL/gloo timeout fires. With ``fresh`` (a store rank 0 prepares from
    raw input), a manifest whose input files changed on disk since (:func:`stale_sources`) is waited past: rank 0
    prepares that store again.

    Raises:
        DataError: no manifest after ``timeout_s`` seconds (the fixes named), or one that is invalid.
    """
    deadline = clock() + timeout_s
    while True:
        if (Path(path).expanduser() / "manifest.json").is_file():
            manifest = read_manifest(path)
            if not (fresh and stale_sources(manifest)):
                return manifest   # else rank 0 is preparing it again from changed input: wait on
        if clock() >= deadline:
            raise DataError(f"waited {timeout_s:.0f} s for rank 0 to prepare the corpus store {path}, but "
                            "its manifest.json did not appear; check rank 0's log, or prepare it once with "
                            "`nbkit prepare-corpus` before launching (or raise --corpus-wait-s). Every "
                            "node must see the same directory (a shared filesystem).")
        sleep(poll_s)


def stale_sources(manifest: dict) -> list[str]:
    """The input files of a store's manifest whose size or modification time on disk differ from the recorded
    ones (a file gone counts): the store no longer matches them; ``[]`` when all match (os.stat only)."""
    out = []
    for src in manifest.get("sources", []):
        if src.get("kind") == "dataset":
            continue
        try:
            st = os.stat(src["path"])
        except OSError:
            out.append(src["path"])
            continue
        if (st.st_size, st.st_mtime) != (src.get("size_bytes"), src.get("mtime")):
            out.append(src["path"])
    return out


def is_datasets_object(obj: Any) -> bool:
    """True for an object of the ``datasets`` library (``Dataset``, ``DatasetDict``, ``IterableDataset``, ...)."""
    return type(obj).__module__.split(".")[0] == "datasets"


def describe_input(obj: Any) -> str:
    """An input's identity as one line, the same one that keys its store folder and names it in ``metrics.json``:
    a ``datasets`` object as the split it is read from (``datasets.Dataset(fingerprint=..., split train)``; a dict of
    splits by its ``train`` split, or its only one), anything else as ``str``.

    Raises:
        ConfigError: a dict of splits with several splits and no ``train`` one (which to read is ambiguous).
    """
    return describe_split(*read_split(obj, "corpus")) if is_datasets_object(obj) else str(obj)


def describe_split(obj: Any, split: str | None) -> str:
    """A ``Dataset`` (by its fingerprint) or an ``IterableDataset`` (which has none) and its split, as one line."""
    where = f", split {split}" if split else ""
    if type(obj).__name__ == "Dataset":
        return f"datasets.Dataset(fingerprint={obj._fingerprint}{where})"
    return f"datasets.IterableDataset(no fingerprint{where})"


def read_split(obj: Any, label: str) -> tuple[Any, str | None]:
    """``(the dataset read, its split name)``: a dict of splits gives its ``train`` split, or its only one.

    Raises:
        ConfigError: several splits and no ``train`` one (``label`` names the input).
    """
    name = type(obj).__name__
    if name in ("DatasetDict", "IterableDatasetDict"):
        splits = list(obj)
        pick = "train" if "train" in obj else splits[0] if len(splits) == 1 else None
        if pick is None:
            raise ConfigError(f"{label}: a {name} with splits {splits} and no 'train' split: pass the split to "
                              f"prepare, e.g. ds[{splits[0]!r}]")
        return obj[pick], pick
    return obj, str(obj.split) if getattr(obj, "split", None) is not None else None


def store_dir_for(corpus) -> Path:
    """``runs/corpus/<name>-<hash of the inputs as absolute paths>``: where a raw corpus is prepared, the same
    however its paths are typed and on every rank and node (a shared filesystem); a ``datasets`` object counts
    by the split it is read from (``dataset-<hash>``; :func:`describe_input`).

    Raises:
        ConfigError: what ``describe_input`` raises (a dict of splits without a ``train`` one).
    """
    items = corpus if isinstance(corpus, (list, tuple)) else [corpus]
    absolute = [describe_input(c) if is_datasets_object(c)
                else os.path.abspath(os.path.expanduser(str(c))).rstrip("/") for c in items]
    name = "dataset" if absolute[0].startswith("datasets.") else Path(absolute[0].rstrip("/*")).name
    return runs.runs_dir() / "corpus" / runs.path_tag(name, "\n".join(absolute), 10, fallback="corpus")


def corpus_store(corpus, out_dir=None, **settings) -> Path:
    """The store for ``corpus``: itself when it is one (:func:`given_store`), else prepared by
    ``prepare_corpus(corpus, out_dir, **settings)`` (default :func:`store_dir_for`; a finished one is reused).

    Raises:
        ConfigError / DataError: what :func:`given_store` and ``prepare_corpus`` raise.
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
