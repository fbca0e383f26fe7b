"""The user's own files: a text corpus or labelled texts, checked before use.

Formats (by extension): ``.txt`` (one text per line), ``.jsonl``/``.json``
(JSON lines or a JSON array of objects), ``.csv`` and ``.tsv`` (a header row).
They are read with ``datasets``' local loaders (``load_dataset("text" | "json" |
"csv", data_files=...)``) into a fresh temporary ``cache_dir`` with
``keep_in_memory=True``; the directory is deleted afterwards, so nothing is
written next to the user's data and an edited file is never served stale from
the Hugging Face cache.

Every mistake a user can make with a file becomes a :class:`DataError` that
names the fix: missing file, unsupported extension, empty file, UTF-16/UTF-32
text (Excel's "Unicode text"; an ``iconv -f UTF-16`` command), other non-UTF-8
bytes (file, byte offset and line; ``iconv -f GBK`` only when the file reads
as GBK, else the bad lines and how to drop or replace them:
:func:`nbkit.data.filecheck.non_utf8_message`), unparsable content (JSON: the 1-based
line), missing column (the existing columns are listed; a tab-separated
``.csv`` is recognised), nothing left after cleaning, a single class, labels
in validation/test unseen in training, an empty split.
"""
from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.data.filecheck import check_utf8, locate_json_error  # noqa: F401  (re-exported)
from nbkit.data.labeled import LabeledData, build_labeled_data
from nbkit.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    import datasets

#: extension -> (datasets builder, extra builder kwargs)
FORMATS: dict[str, tuple[str, dict]] = {
    ".txt": ("text", {}),
    ".jsonl": ("json", {}),
    ".json": ("json", {}),
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"sep": "\t"}),
}
def _check_file(path: str | Path) -> tuple[Path, str]:
    """Resolve and validate a user file; return it with its read codec."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"File not found: {path} (working directory: {Path.cwd()}). "
                        "Check the path, or give an absolute one.")
    if not path.is_file():
        raise DataError(f"{path} is a directory; pass one file (.txt, .jsonl, .json, .csv, .tsv).")
    if path.suffix.lower() not in FORMATS:
        raise DataError(f"{path}: unsupported extension {path.suffix!r}. Use one of "
                        f"{', '.join(FORMATS)} (rename the file or convert it, e.g. save a sheet as CSV UTF-8).")
    if path.stat().st_size == 0:
        raise DataError(f"{path} is empty (0 bytes); check that it was saved or copied completely.")
    return path, check_utf8(path)


@contextlib.contextmanager
def _quiet_datasets(builder: str):
    """Hide ``datasets``' "Generating train split" bars and its builder's log lines.

    The ``json`` builder logs "Failed to load JSON from file ..." before it
    raises; nbkit turns that failure into a :class:`DataError`, so the log line
    would only repeat it in worse words. Both settings are restored after.
    """
    from nbkit.train.switches import logger_level, progress_bars

    with progress_bars("datasets", False), \
            logger_level(f"datasets.packaged_modules.{builder}.{builder}", logging.CRITICAL):
        yield


def _load_table(path: Path, encoding: str) -> "datasets.Dataset":
    """Read one checked file with ``datasets``' local loader, cached nowhere persistent.

    Raises:
        DataError: no rows, or the loader fails; for JSON the message gives the
            first bad line (1-based, :func:`locate_json_error`).
    """
    import datasets

    builder, extra = FORMATS[path.suffix.lower()]
    with tempfile.TemporaryDirectory(prefix="nbkit-datasets-") as cache, _quiet_datasets(builder):
        try:
            return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache,
                                         keep_in_memory=True, encoding=encoding, **extra)
        except Exception as err:  # DatasetGenerationError wraps the parser's error
            if "corresponds to no data" in str(err):  # a CSV with only a header row
                raise DataError(f"{path} has no rows; add data (a CSV needs rows below its header).") from err
            where = locate_json_error(path, encoding) if builder == "json" else None
            if where:
                raise DataError(f"Could not read {path} as JSON: {where}. Fix that line; a {path.suffix} file "
                                "needs " + ("one JSON object per line." if path.suffix.lower() == ".jsonl" else
                                            "an array of objects, or one object per line.")) from err
            cause = err.__cause__ or err
            reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
            raise DataError(f"Could not read {path} as {builder.upper()} ({type(cause).__name__}: {reason}). "
                            f"Check that the file is valid {path.suffix} with one record per "
                            f"{'line' if builder != 'csv' else 'row and a header row'}.") from err


def _column(ds: "datasets.Dataset", name: str, path: Path, role: str) -> list:
    """One column as a Python list (read from the Arrow table, not row by row).

    Raises:
        DataError: no rows, or no such column (the existing ones are listed; a
            single header holding tabs or semicolons means another delimiter).
    """
    if len(ds) == 0:
        raise DataError(f"{path} has no rows; add data (a CSV needs rows below its header).")
    if name not in ds.column_names:
        arg = "text_column" if role == "text" else "label_column"
        columns = ds.column_names
        if len(columns) == 1 and path.suffix.lower() == ".csv":
            if "\t" in columns[0]:
                raise DataError(f"{path} looks tab-separated: its single column is {columns[0]!r}. Rename it "
                                f"to {path.with_suffix('.tsv').name} (nbkit reads .tsv files with tab "
                                "delimiters), or save it comma-separated.")
            if ";" in columns[0]:
                raise DataError(f"{path} looks semicolon-separated: its single column is {columns[0]!r}. "
                                "Save it comma-separated (Excel: \"CSV UTF-8 (comma delimited)\").")
        raise DataError(f"{path} has no column {name!r}; its columns are {columns}. "
                        f"Pass {arg}= one of those.")
    return ds.data.column(name).to_pylist()


def load_text_file(path: str | Path, text_column: str = "text") -> "datasets.Dataset":
    """A user corpus as a ``datasets.Dataset`` with one column ``text``.

    Args:
        path: ``.txt`` (one text per line; ``text_column`` is ignored),
            ``.jsonl``/``.json`` or ``.csv``/``.tsv`` (``text_column`` is read).
        text_column: column holding the text in JSON/CSV files.

    Returns:
        Column ``text`` (str): every non-empty text, stripped, file order.
        Duplicates are kept (this is for corpora; labelled data goes through
        :func:`load_labeled_files`).

    Raises:
        DataError: missing file, unsupported extension, empty file, non-UTF-8
            bytes, unparsable content, missing column, nothing but blanks.
    """
    import datasets

    path, encoding = _check_file(path)
    ds = _load_table(path, encoding)
    raw = _column(ds, "text" if path.suffix.lower() == ".txt" else text_column, path, "text")
    texts = [str(t).strip() for t in raw if t is not None]
    texts = [t for t in texts if t]
    if not texts:
        raise DataError(f"{path} holds only blank texts; check the file and text_column={text_column!r}.")
    return datasets.Dataset.from_dict({"text": texts})


def _read_labeled(path: str | Path, text_column: str, label_column: str) -> tuple[list, list]:
    path, encoding = _check_file(path)
    if path.suffix.lower() == ".txt":
        raise DataError(f"{path}: a .txt file has no label column. Save the data as .csv or .jsonl with "
                        f"columns {text_column!r} and {label_column!r}.")
    ds = _load_table(path, encoding)
    return _column(ds, text_column, path, "text"), _column(ds, label_column, path, "label")


def load_labeled_files(
    train: str | Path,
    validation: str | Path | None = None,
    test: str | Path | None = None,
    text_column: str = "text",
    label_column: str = "label",
    seed: int = 0,
    val_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_train: int | None = None,
) -> LabeledData:
    """Labelled texts from the user's files, cleaned and split like the bundled reviews.

    Each file is stripped, de-duplicated and freed of contradictions (a text
    with two labels), see :func:`nbkit.data.labeled.build_labeled_data`; texts of a
    validation/test file that also occur in training are dropped
    (``report["n_overlap_dropped"]``). Splits not given are drawn from the
    training file, stratified by label, with ``val_fraction``/``test_fraction``.

    Labels: strings get ids in sorted order (``label2id`` from the training
    file, deterministic). Integers ``0..k-1`` are kept as ids (``label2id``
    maps ``"0"`` -> 0, ...); other integer sets (e.g. stars 1-5) are renumbered
    in increasing order so ids are contiguous (``report["label2id"]`` shows it).

    Args:
        train, validation, test: ``.jsonl``/``.json``/``.csv``/``.tsv`` paths.
        text_column, label_column: column names in every file.
        seed: split/subsample seed; same files and seed, same splits.
        val_fraction, test_fraction: shares of the unique training texts used
            when the split's file is not given; exactly 0 means "no such split"
            (e.g. ``val_fraction=0`` with a separate test file and no
            validation), a positive share that rounds to 0 examples is an error.
        max_train: stratified cap on the training split (smoke runs).

    Returns:
        :class:`LabeledData`; ``report`` also holds ``files`` (split -> path).

    Raises:
        DataError: any bad file (see the module docstring), a single class,
            labels in validation/test unseen in training (listed), a split left
            empty (e.g. every test text also occurs in training).

    Warns:
        UserWarning: labels that differ only in case or width ("Positive" and
            "positive"), which would become separate classes.
    """
    sources: dict[str, tuple[list, list]] = {}
    files: dict[str, str] = {}
    for split, path in (("train", train), ("validation", validation), ("test", test)):
        if path is None:
            continue
        sources[split] = _read_labeled(path, text_column, label_column)
        files[split] = str(path)
    data = build_labeled_data(sources, seed=seed, val_fraction=val_fraction, test_fraction=test_fraction,
                              max_train=max_train)
    data.report["files"] = files
    data.report["label2id"] = dict(data.label2id)
    return data

