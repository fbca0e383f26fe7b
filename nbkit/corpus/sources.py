"""Corpus inputs (files, globs, folders, ``datasets`` objects) resolved to :class:`Source` s, each file once.

A file's format comes from its name, else from its content (:func:`nbkit.corpus.formats.sniff`). Folders are
walked recursively, links followed, each folder and file once; hidden entries, stores, :data:`NOT_CORPUS`
types and binary files are left out and listed. An input that is or lies in a store is refused.
"""
from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nbkit.corpus.formats import first_record, is_wikipedia, sniff, text_type_problem
from nbkit.corpus.store import describe_split, holds_store_files, read_split
from nbkit.errors import ConfigError

KINDS = {".txt": "txt", ".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gz", ".zst": "zst"}
#: Extensions left out of a folder as not corpus text (a file named explicitly is read by content).
NOT_CORPUS = frozenset(
    ".md .rst .html .htm .xml .csv .tsv .xls .xlsx .doc .docx .ppt .pptx .pdf .odt .epub .py .ipynb .sh .js .c .h "
    ".cpp .java .go .rs .yaml .yml .toml .cfg .ini .conf .lock .log .pkl .pickle .npy .npz .pt .bin .safetensors .h5 "
    ".arrow .idx .ids .wst .done .hashes .tmp .part .png .jpg .jpeg .gif .bmp .webp .svg .ico .mp3 .wav .mp4 .mkv "
    ".avi .zip .tar .tgz .bz2 .xz .7z .rar .exe .so .dll .dylib .o .a .class .jar .db .sqlite .iso .img".split())
DATASET_TYPES = ("Dataset", "DatasetDict", "IterableDataset", "IterableDatasetDict")
MAX_SKIPPED = 100  # entries of ``skipped`` the manifest keeps (``n_skipped``: the exact count)


@dataclass(frozen=True)
class Source:
    """One input: ``path`` (absolute, or a dataset's label), ``kind`` (txt/jsonl/json/parquet/dataset),
    ``compression`` (None/gz/zst), ``size_bytes``, ``detected`` (``"name"`` or ``"content: ..."``), ``wikipedia``
    (``min_cjk_share="auto"`` applies). A ``datasets`` input: the object in ``dataset``, its fingerprint in
    ``sha256`` (None for a stream: ``reusable`` False, its store cannot be resumed or reused).
    """

    path: str
    kind: str
    compression: str | None
    size_bytes: int
    mtime: float
    detected: str = "name"
    sha256: str | None = None
    reusable: bool = True
    dataset: Any = field(default=None, compare=False, repr=False)
    wikipedia: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "size_bytes": self.size_bytes, "mtime": self.mtime, "kind": self.kind,
               "compression": self.compression, "detected": self.detected, "wikipedia": self.wikipedia}
        if self.kind == "dataset":
            out["sha256"] = self.sha256
        return out


def classify(path: Path) -> tuple[str, str | None] | None:
    """``(kind, compression)`` from the file name (``a.jsonl.gz`` -> ``("jsonl", "gz")``), None if unknown."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    kind = KINDS.get(suffixes[-1]) if suffixes else None
    return (kind, compression) if kind else None


def fingerprint(path) -> str:
    """SHA-256 (hex) of the file's bytes as stored, read in 1 MB blocks: tells a touched or copied input
    (new modification time) from an edited one.

    Raises:
        OSError: the file cannot be read.
    """
    h, buf = hashlib.sha256(), bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def _store_of(path: Path, cache: dict[Path, bool]) -> Path | None:
    """The nearest folder holding store files among the parents of the file ``path`` (absolute)."""
    for folder in path.parents:
        if folder not in cache:
            cache[folder] = holds_store_files(folder)
        if cache[folder]:
            return folder
    return None


def _store_error(text: str, path: Path, store: Path) -> ConfigError:
    done = (store / "manifest.json").is_file()
    what = "a prepared corpus store" if done else "a corpus store whose preparation has not finished"
    fix = ("train on it as it is: pass it alone (corpus=STORE, --corpus STORE)" if done else
           "finish it with its original command (it resumes)")
    where = (f"{text!r} is {what} ({store})" if path.resolve() == store.resolve() else
             f"{text!r} lies in {what} at {store}")
    return ConfigError(f"{where}: its manifest.json, vocab.txt, tokenizer.json, ... are not text to prepare. "
                       f"To use the store, {fix}; to prepare raw text, name its files or folders without "
                       "the store (a store's manifest.json lists its own inputs under \"sources\")")


def _walk(root: Path, skipped: list[dict]) -> list[Path]:
    """Files under ``root``, sorted (links followed, each folder once by ``(st_dev, st_ino)``); hidden entries
    and stores go to ``skipped``."""
    found: list[Path] = []
    seen_dirs: dict[tuple[int, int], str] = {}

    def visit(folder: Path) -> None:
        try:
            st = folder.stat()
        except OSError as exc:
            skipped.append({"path": str(folder), "reason": f"unreadable folder ({exc.strerror})"})
            return
        key = (st.st_dev, st.st_ino)
        if key in seen_dirs:
            skipped.append({"path": str(folder), "reason": f"a link to a folder already read ({seen_dirs[key]}): "
                                                           "read once (a link loop, or two links to one folder)"})
            return
        seen_dirs[key] = str(folder)
        if folder != root and holds_store_files(folder):
            skipped.append({"path": str(folder), "reason": "a corpus store (its files are not text to prepare)"})
            return
        try:   # listed only now: a store's thousands of shards or a loop's folder are never listed
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            skipped.append({"path": str(folder), "reason": f"unreadable folder ({exc.strerror})"})
            return
        for entry in entries:
            p = folder / entry.name
            if entry.name.startswith("."):
                skipped.append({"path": str(p), "reason": "hidden"})
            elif entry.is_dir():   # follows a link
                visit(p)
            elif entry.is_file():
                found.append(p)
            elif entry.is_symlink():
                skipped.append({"path": str(p), "reason": f"a broken link (to {os.readlink(p)})"})

    visit(root)
    return sorted(found)


def _dataset_source(obj: Any, text_field: str, label: str) -> Source:
    """A ``datasets`` object as a source (a dict of splits: its ``train`` split, or its only one)."""
    obj, split = read_split(obj, label)
    path = describe_split(obj, split)
    name = type(obj).__name__
    if obj.features is not None:
        if text_field not in obj.features:
            raise ConfigError(f"{label}: the {name} has no column {text_field!r} (columns: {list(obj.features)}); "
                              "pass text_field= naming the text column")
        why = text_type_problem(obj.features.arrow_schema.field(text_field).type)
        if why:
            raise ConfigError(f"{label}: column {text_field!r} of the {name} is {why}; cast it to string "
                              "(ds.cast_column(...)) or pass text_field= naming the text column")
    where = f", split {split}" if split else ""
    if name == "Dataset":
        return Source(path, "dataset", None, int(obj.data.nbytes), 0.0, f"a datasets.Dataset of {len(obj):,} rows"
                      f"{where}, read in row batches", obj._fingerprint, True, obj)
    return Source(path, "dataset", None, int(getattr(obj.info, "dataset_size", None) or 0), 0.0,
                  f"a datasets.IterableDataset{where}, streamed in batches; it has no fingerprint, so the store "
                  "cannot tell it from another stream: it cannot be resumed or reused", None, False, obj)


def _refuse_type(item: Any, label: str) -> ConfigError:
    kind = type(item)
    what = f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__name__
    hint = ""
    if isinstance(item, dict):
        hint = "; a dict of columns: pass datasets.Dataset.from_dict(d)"
    elif kind.__name__ == "DataFrame":
        hint = "; a pandas DataFrame: pass datasets.Dataset.from_pandas(df)"
    article = "an" if what[:1].lower() in "aeiou" else "a"
    return ConfigError(f"{label} is {article} {what}: prepare_corpus takes a path, a glob or a folder (str or "
                       f"pathlib.Path), a datasets Dataset / DatasetDict / IterableDataset, or a list of them{hint}")


def resolve_inputs(inputs, text_field: str = "text", skipped: list[dict] | None = None) -> list[Source]:
    """Files, globs, folders and ``datasets`` objects as sources, in argument order, each file once; what a
    folder leaves out is appended to ``skipped`` as ``{"path", "reason"}``.

    Raises:
        ConfigError: no input; one that matches nothing (what was left out named), a named binary file, a type
            that is not an input, a ``datasets`` object without a text ``text_field`` column, or an input that
            is or lies in a store (a store is never read as text).
    """
    if isinstance(inputs, (str, os.PathLike)) or type(inputs).__name__ in DATASET_TYPES:
        inputs = [inputs]
    elif not isinstance(inputs, (list, tuple)):
        raise _refuse_type(inputs, "inputs")
    inputs = list(inputs)
    if not inputs:
        raise ConfigError("prepare_corpus needs at least one input: a file, a glob, a folder or a datasets.Dataset")
    skipped = [] if skipped is None else skipped
    seen: dict[Any, Source] = {}
    stores: dict[Path, bool] = {}
    for i, item in enumerate(inputs):
        label = "inputs" if len(inputs) == 1 else f"inputs[{i}]"
        if type(item).__name__ in DATASET_TYPES and type(item).__module__.startswith("datasets"):
            src = _dataset_source(item, text_field, label)
            seen.setdefault(src.path if src.reusable else ("stream", i), src)
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise _refuse_type(item, label)
        text = os.fspath(item)
        path = Path(text).expanduser()
        before = len(skipped)
        named = path.is_file()
        if path.is_dir():
            if holds_store_files(path):
                raise _store_error(text, path, path)
            found = _walk(path, skipped)
        elif named:
            found = [path]
        elif glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(os.path.expanduser(text), recursive=True) if Path(p).is_file())
        else:
            found = []
        n_sources = 0
        for p in found:
            store = _store_of(p.resolve(), stores)
            if store is not None:
                raise _store_error(text, path, store)
            st = p.stat()
            key = (st.st_dev, st.st_ino)
            if key in seen:
                if not (named and seen[key].path == str(p.resolve())):   # a file named twice: silently once
                    skipped.append({"path": str(p), "reason": f"the same file as {seen[key].path}: read once"})
                n_sources += 1
                continue
            by_name = classify(p)
            if by_name:
                kind, comp, detected = *by_name, "name"
            elif not named and p.suffix.lower() in NOT_CORPUS:
                skipped.append({"path": str(p), "reason": f"a {p.suffix} file, not corpus text (name it .txt or "
                                                          ".jsonl, or pass it by name, to read it)"})
                continue
            else:
                kind, comp, detected = sniff(str(p), COMPRESSIONS.get(p.suffix.lower()))
                if kind is None:
                    if named:
                        raise ConfigError(f"{p}: {detected}, not corpus text; pass .txt, .jsonl, .json or .parquet "
                                          "files (optionally .gz or .zst), or a folder of them")
                    skipped.append({"path": str(p), "reason": detected})
                    continue
            seen[key] = Source(str(p.resolve()), kind, comp, st.st_size, st.st_mtime, detected)
            n_sources += 1
        if not n_sources:
            raise ConfigError(_nothing_found(text, path, skipped[before:]))
    return [replace(x, wikipedia=is_wikipedia(first_record(x))) for x in seen.values()]


def _nothing_found(text: str, path: Path, left_out: list[dict]) -> str:
    if left_out:
        shown = "; ".join(f"{s['path']}: {s['reason']}" for s in left_out[:3])
        more = f" (and {len(left_out) - 3} more)" if len(left_out) > 3 else ""
        return f"input {text!r} holds no corpus file; left out: {shown}{more}"
    if not path.exists() and ("\n" in text or (len(text) > 8 and not any(c in text for c in "/\\.*"))):
        return (f"input {text!r} is no file or folder; it looks like a text, not a path: pass texts as "
                "datasets.Dataset.from_dict({'text': texts}), or write them to a .txt file")
    return f"input {text!r} matches no corpus file (.txt, .jsonl, .json, .parquet, optionally .gz/.zst); check the path"
