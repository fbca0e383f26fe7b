"""The user's own files: a text corpus or labelled texts (.txt, .jsonl/.json, .csv/.tsv), checked before use.

Every value is read as written: ``.txt``/``.csv``/``.tsv`` with ``datasets``' local loaders (every cell of a used
column as its text, only an empty cell missing) into a temporary cache that is deleted afterwards (nothing written
beside the data, never a stale copy); JSON record by record (:func:`read_json_columns`), since Arrow's type
inference rewrites a column of mixed types as escaped JSON text and takes lists without complaint. Every mistake
with a file is a :class:`DataError` naming the fix; a bad JSON record's 1-based line is raised or skipped
(``errors``).
"""
from __future__ import annotations

import contextlib
import logging
import math
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.data.filecheck import _a, _json_kind, array_item_line, check_utf8, json_records, record_lines
from nbkit.data.labeled import ExampleOrigin, LabeledData, build_labeled_data
from nbkit.data.textrule import CORPUS_MAX_CHARS, check_text, cut_rows, repair_surrogates
from nbkit.errors import ConfigError, DataError

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


def check_file(path: str | Path, formats=FORMATS, hint: str = "e.g. save a sheet as CSV UTF-8") -> tuple[Path, str]:
    """The resolved path and its read codec (:func:`~nbkit.data.filecheck.check_utf8`) of a user's file whose
    extension is one of ``formats`` (a collection of ``".ext"``); ``hint``: how to convert another file.

    Raises:
        DataError: not found, a directory, another extension, empty (0 bytes), or not UTF-8.
    """
    path = Path(path).expanduser()
    listed = ", ".join(formats)
    if not path.exists():
        raise DataError(f"File not found: {path} (working directory: {Path.cwd()}). "
                        "Check the path, or give an absolute one.")
    if not path.is_file():
        raise DataError(f"{path} is a directory; pass one file ({listed}).")
    if path.suffix.lower() not in formats:
        raise DataError(f"{path}: unsupported extension {path.suffix!r}. Use one of "
                        f"{listed} (rename the file or convert it, {hint}).")
    if path.stat().st_size == 0:
        raise DataError(f"{path} is empty (0 bytes); check that it was saved or copied completely.")
    return path, check_utf8(path)


@contextlib.contextmanager
def _quiet_datasets(builder: str):
    """Hide ``datasets``' progress bars and the builder's log (its "Failed to load JSON" line only
    repeats the DataError raised instead); restored after."""
    from nbkit.switches import logger_level, progress_bars

    with progress_bars("datasets", False), \
            logger_level(f"datasets.packaged_modules.{builder}.{builder}", logging.CRITICAL):
        yield


def _load_table(path: Path, encoding: str, columns: list[str], errors: str = "raise") -> tuple[object, dict]:
    """``(table, info)``: for a ``.txt``/``.csv``/``.tsv`` file a ``datasets.Dataset`` whose ``columns`` hold each
    cell as its text (pandas would turn ``"01"`` into 1 and ``"None"``/``"NA"`` into missing values; only an
    empty cell is missing) and ``info`` ``{}``; for JSON :func:`read_json_columns`' table and skipped/repaired lines.

    Raises:
        DataError: no rows, or the loader fails (for JSON: the first bad 1-based line).
    """
    import datasets

    builder, extra = FORMATS[path.suffix.lower()]
    if builder == "json":
        return read_json_columns(path, encoding, columns, errors)
    if builder == "csv":  # cells as written; a converter for a column the file lacks is ignored
        extra = {**extra, "converters": dict.fromkeys(columns, str), "keep_default_na": False, "na_values": [""]}
    with tempfile.TemporaryDirectory(prefix="nbkit-datasets-") as cache, _quiet_datasets(builder):
        try:
            return datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache,
                                         keep_in_memory=True, encoding=encoding, **extra), {}
        except Exception as err:  # DatasetGenerationError wraps the parser's error
            if "corresponds to no data" in str(err):  # a CSV with only a header row
                raise DataError(f"{path} has no rows; add data (a CSV needs rows below its header).") from err
            cause = err.__cause__ or err
            reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
            raise DataError(f"Could not read {path} as {builder.upper()} ({type(cause).__name__}: {reason}). "
                            f"Check that the file is valid {path.suffix} with one record per "
                            f"{'line' if builder != 'csv' else 'row and a header row'}.") from err


def _warn_file_issues(path: Path, info: dict, unit: str = "line") -> None:
    """One warning naming the 1-based lines skipped or repaired in ``path`` (``unit`` ``"item"``: the items of a
    ``.json`` array; the NER span reader's warning too)."""
    said = []
    if info.get("n_skipped_lines"):
        said.append(f"{info['n_skipped_lines']} unreadable line(s) skipped (errors=\"skip\"): line "
                    + ", ".join(map(str, info["skipped_lines"]))
                    + (" ..." if info["n_skipped_lines"] > len(info["skipped_lines"]) else ""))
    if info.get("n_surrogate_lines"):
        said.append(f"{info['n_surrogate_lines']} {unit}(s) with a lone surrogate escape (half of an emoji) "
                    f"repaired to U+FFFD: {unit} " + ", ".join(map(str, info["surrogate_lines"]))
                    + (" ..." if info["n_surrogate_lines"] > len(info["surrogate_lines"]) else ""))
    if said:
        warnings.warn(f"{path}: {'; '.join(said)}.", UserWarning, stacklevel=3)


def _column(ds, name: str, path: Path, role: str) -> list:
    """Column ``name`` of a ``datasets.Dataset`` or a :func:`read_json_columns` table, as a list; for the
    ``"text"`` role a JSON number as its text (``2024`` -> ``"2024"``; labels keep their numbers).

    Raises:
        DataError: no rows, or no such column (the columns listed; a tab or semicolon in a single
            header named as the delimiter).
    """
    is_table = isinstance(ds, dict)
    columns = ds["__fields__"] if is_table else ds.column_names
    if (len(next(iter(ds.values()))) if is_table else len(ds)) == 0:
        raise DataError(f"{path} has no rows; add data (a CSV needs rows below its header).")
    if name not in columns:
        arg = "text_column" if role == "text" else "label_column"
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
    values = ds[name] if is_table else ds.data.column(name).to_pylist()
    if role == "text":
        values = [str(v) if type(v) in (int, float) else v for v in values]   # floats are finite (read_json_columns)
    return values


def load_text_file(path: str | Path, text_column: str = "text", errors: str = "raise",
                   max_chars: int | None = CORPUS_MAX_CHARS, report: dict | None = None) -> "datasets.Dataset":
    """A user corpus as column ``text``: valid texts (:func:`~nbkit.data.textrule.check_text`), stripped,
    in file order, duplicates kept, rows over ``max_chars`` characters cut at sentence ends.

    Args:
        path: ``.txt`` (one text per line), ``.jsonl``/``.json`` or ``.csv``/``.tsv`` (``text_column``).
        errors: an unreadable JSON line: ``"raise"`` (DataError naming its 1-based line) or ``"skip"``.
        max_chars: longest row in characters; ``None`` keeps rows whole.
        report: a dict filled with ``n_read``, ``missing``, ``blank``, ``repaired_surrogates``, :func:`cut_rows`'
            info, ``n_texts`` and the skipped/surrogate 1-based lines.

    Raises:
        DataError: missing, empty or unsupported file, non-UTF-8 bytes, unparsable content, missing column,
            nothing but blanks. ConfigError: ``errors`` not "raise"/"skip", ``max_chars`` below 1.
    """
    import datasets

    check_errors(errors)
    if max_chars is not None and max_chars < 1:
        raise ConfigError(f"max_chars={max_chars}: use at least 1 (default 2,000), or None to keep rows whole.")
    path, encoding = check_file(path)
    name = "text" if path.suffix.lower() == ".txt" else text_column
    ds, info = _load_table(path, encoding, [name], errors)
    _warn_file_issues(path, info)
    raw = _column(ds, name, path, "text")
    counts: Counter = Counter()
    texts = [t.strip() for t in (check_text(v, counts) for v in raw) if t is not None]
    if not texts:
        raise DataError(f"{path} holds only blank texts ({dict(counts)}); check the file and "
                        f"text_column={text_column!r}.")
    texts, cut = cut_rows(texts, max_chars)
    if report is not None:
        report.update({"n_read": len(raw), **{k: counts[k] for k in ("missing", "blank", "repaired_surrogates")},
                       **cut, "n_texts": len(texts), **info})
    return datasets.Dataset.from_dict({"text": texts})


def _sure_lines(path: Path, encoding: str, info: dict, n_raw: int) -> list[int] | None:
    """The 1-based file line of each record read (``record_lines``), or None where the mapping would be a guess
    (more lines skipped than listed, a ``.json`` array, a count that differs from the records read)."""
    if info.get("n_skipped_lines", 0) > len(info.get("skipped_lines", ())):
        return None
    lines = record_lines(path, encoding, info.get("skipped_lines", ()))
    return lines if lines is not None and len(lines) == n_raw else None


def _origins(data: LabeledData, files: dict, lines: dict) -> dict:
    """Per split of ``data``, an :class:`ExampleOrigin` naming each example's file and line (its record number
    where the line is unsure)."""
    out = {}
    for split, (source, rows) in data.rows.items():
        if source in files:
            at = lines.get(source)
            out[split] = ExampleOrigin(str(files[source]), tuple(at[r - 1] if at else r for r in rows),
                                       "line" if at else "record")
    return out


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
    errors: str = "raise",
) -> LabeledData:
    """Labelled texts from the user's ``.jsonl``/``.json``/``.csv``/``.tsv`` files, cleaned and split as
    :func:`~nbkit.data.labeled.build_labeled_data` does (same arguments); a split without a file is drawn from
    ``train``. ``errors``: as :func:`load_text_file`.

    Returns:
        :class:`LabeledData`; ``report`` also has ``files``, ``label2id`` and per split (``report["sources"]``)
        the skipped and repaired lines; ``origins``: per split each example's file and line.

    Raises:
        ConfigError: ``train`` is None, or bad ``errors``/fractions.
        DataError: a bad file, or :func:`~nbkit.data.labeled.build_labeled_data`'s errors.

    Warns:
        UserWarning: skipped or repaired lines, and labels differing only in case or width.
    """
    if train is None:
        raise ConfigError("load_labeled_files(train=None): the training file is required (the labelled texts the "
                          "classifier learns from); pass its path, e.g. train_file='data/sample_reviews.csv'")
    check_errors(errors)
    sources: dict[str, tuple[list, list]] = {}
    files: dict[str, str] = {}
    issues: dict[str, dict] = {}
    read: dict[str, tuple[Path, str]] = {}
    for split, path in (("train", train), ("validation", validation), ("test", test)):
        if path is None:
            continue
        checked, encoding = read[split] = check_file(path)
        if checked.suffix.lower() == ".txt":
            raise DataError(f"{checked}: a .txt file has no label column. Save the data as .csv or .jsonl with "
                            f"columns {text_column!r} and {label_column!r}.")
        ds, issues[split] = _load_table(checked, encoding, [text_column, label_column], errors)
        _warn_file_issues(checked, issues[split])
        sources[split] = (_column(ds, text_column, checked, "text"), _column(ds, label_column, checked, "label"))
        files[split] = str(path)
    data = build_labeled_data(sources, seed=seed, val_fraction=val_fraction, test_fraction=test_fraction,
                              max_train=max_train)
    lines = {}
    for split, info in issues.items():
        source = data.report["sources"][split]
        source.update(info)
        lines[split] = at = _sure_lines(*read[split], info, source["n_raw"])
        if at is not None:  # drop_rows (1-based records) as drop_lines (1-based file lines)
            source["drop_lines"] = {why: [at[r - 1] for r in rows] for why, rows in source.pop("drop_rows").items()}
    data.origins = _origins(data, files, lines)
    data.report["files"] = files
    data.report["label2id"] = dict(data.label2id)
    return data


#: the policies for a record that cannot be read
ERRORS = ("raise", "skip")
_SHOWN = 20  # line numbers kept in a report


def check_errors(errors: str) -> None:
    """Raise :class:`ConfigError` unless ``errors`` is in :data:`ERRORS`."""
    if errors not in ERRORS:
        raise ConfigError(f"errors={errors!r}: use 'raise' (stop at the first bad record, naming its line) "
                          "or 'skip' (skip bad records; their lines are listed in the report).")


def read_json_columns(path: Path, encoding: str, columns: list[str], errors: str = "raise") -> tuple[dict, dict]:
    """``(table, info)`` of a UTF-8 ``.jsonl``/``.json`` file read record by record: ``table`` maps each of
    ``columns`` to its values as written, whatever mix of types the file has (a string, a number, or ``None``
    where a record lacks it or holds null, NaN or Infinity), and ``"__fields__"`` to every field seen, in file
    order; ``info``: ``n_skipped_lines``, ``skipped_lines``, ``n_surrogate_lines``, ``surrogate_lines`` (first 20,
    1-based).

    Raises:
        DataError: with ``errors="raise"`` the first line that is not a JSON object or holds an array, an object or
            a boolean in one of ``columns`` (its 1-based line; in a ``.json`` array also its item); a ``.json``
            array that does not parse or holds a non-object item; no record at all.
    """
    check_errors(errors)
    table: dict[str, list] = {c: [] for c in columns}
    fields: dict[str, None] = {}  # every field seen, in file order
    info = {"n_skipped_lines": 0, "skipped_lines": [], "n_surrogate_lines": 0, "surrogate_lines": []}
    array: list = []  # a .json array's text, read again only to place a bad item on its line
    for lineno, item, record, problem in json_records(path, encoding, '{"text": ..., "label": ...}'):
        values = [] if problem else [record.get(c) for c in columns]
        for i, v in enumerate(values):
            if v is None or type(v) is str or type(v) is int:
                continue
            if type(v) is float:
                if not math.isfinite(v):  # NaN/Infinity: Python's json writes them for a missing float
                    values[i] = None
                continue
            if lineno is None and (errors == "raise" or len(info["skipped_lines"]) < _SHOWN):
                array = array or [path.read_text(encoding=encoding)]
                lineno = array_item_line(array[0], item)
            where = f"line {lineno}" if item is None else f"item {item} (1-based) of the JSON array (line {lineno})"
            problem = f"{where}: field {columns[i]!r} is {_a(_json_kind(v))}; use a string or a number"
            break
        if problem is not None:
            if errors == "raise":
                raise DataError(f"Could not read {path} as JSON: {problem}. Fix that line, or load with "
                                "errors=\"skip\" to skip such lines (their 1-based line numbers are listed in the "
                                "report and a warning).")
            info["n_skipped_lines"] += 1
            if len(info["skipped_lines"]) < _SHOWN:
                info["skipped_lines"].append(lineno)
            continue
        if not fields.keys() >= record.keys():
            fields.update(dict.fromkeys(record))
        for c, v in zip(columns, values):
            table[c].append(v)
        if lineno is not None and any(type(v) is str and repair_surrogates(v)[1] > 0 for v in values):
            info["n_surrogate_lines"] += 1
            if len(info["surrogate_lines"]) < _SHOWN:
                info["surrogate_lines"].append(lineno)
    if not any(table[c] for c in columns) and not fields:
        raise DataError(f"{path} has no readable record (skipped lines: {info['skipped_lines']}); check the file.")
    table["__fields__"] = list(fields)
    return table, info
