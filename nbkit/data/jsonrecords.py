"""JSON files that Arrow refuses, read record by record so one bad line does not sink the file.

``datasets``' JSON loader (Arrow) rejects a whole file for one record it cannot take: a lone
UTF-16 surrogate escape (``"\\ud83d"``, half of an emoji, as some exporters write it), a line
that is not JSON, or a field whose type changes between lines. When that happens
:mod:`nbkit.data.userfiles` reads the file again with :func:`read_json_columns`, Python's
``json`` (which accepts lone surrogates), line by line for JSON lines:

- lone surrogates are kept here; :func:`nbkit.data.textrule.check_text` replaces them by U+FFFD
  and counts them (``repaired_surrogates``); the 1-based lines holding them are listed;
- a line that is not a JSON object: ``errors="raise"`` (default) raises a :class:`DataError`
  naming its 1-based line and the fix; ``errors="skip"`` skips it and lists its line;
- a field whose type changes (a number on one line, a string on another) is no error here: each
  value keeps its Python type (the text rule counts a non-string text as ``missing``).

Memory: the requested columns as Python lists (this path only runs when Arrow failed).
"""
from __future__ import annotations

import json
from pathlib import Path

from nbkit.data.filecheck import _a, _json_kind, json_error_text, json_lines
from nbkit.data.textrule import repair_surrogates
from nbkit.errors import ConfigError, DataError

#: the policies for a record that cannot be read
ERRORS = ("raise", "skip")
_SHOWN = 20  # line numbers kept in a report


def check_errors(errors: str) -> None:
    """Raise :class:`ConfigError` unless ``errors`` is one of :data:`ERRORS`."""
    if errors not in ERRORS:
        raise ConfigError(f"errors={errors!r}: use 'raise' (stop at the first bad record, naming its line) "
                          "or 'skip' (skip bad records; their lines are listed in the report).")


def _has_surrogate(value) -> bool:
    return isinstance(value, str) and repair_surrogates(value)[1] > 0


def read_json_columns(path: Path, encoding: str, columns: list[str], errors: str = "raise") -> tuple[dict, dict]:
    """``columns`` of a ``.jsonl``/``.json`` file as Python lists, plus what was skipped or needs repair.

    Args:
        path: the file (already checked to be UTF-8).
        encoding: its codec (``utf-8`` or ``utf-8-sig``).
        columns: the fields to return; a record without one gives ``None`` there.
        errors: ``"raise"`` or ``"skip"`` for a line that is not a JSON object (see the module docstring).

    Returns:
        ``(table, info)``: ``table`` maps each column to a list (one entry per record read) and
        ``"__fields__"`` to the fields seen in any record; ``info`` has ``n_skipped_lines``,
        ``skipped_lines`` (first 20, 1-based), ``n_surrogate_lines`` and ``surrogate_lines`` (first 20).

    Raises:
        DataError: with ``errors="raise"``, the first line that is not a JSON object (1-based line,
            the parser's reason, and ``errors="skip"`` as the way to load the rest); a ``.json``
            array that does not parse (line and column); no record at all.
    """
    check_errors(errors)
    table: dict[str, list] = {c: [] for c in columns}
    fields: set[str] = set()
    info = {"n_skipped_lines": 0, "skipped_lines": [], "n_surrogate_lines": 0, "surrogate_lines": []}
    for lineno, record, problem in _records(path, encoding, columns):
        if problem is not None:
            if errors == "raise":
                raise DataError(f"Could not read {path} as JSON: {problem}. Fix that line, or load with "
                                "errors=\"skip\" to skip such lines (their 1-based line numbers are listed in the "
                                "report and a warning).")
            info["n_skipped_lines"] += 1
            if len(info["skipped_lines"]) < _SHOWN:
                info["skipped_lines"].append(lineno)
            continue
        fields.update(record)
        for c in columns:
            table[c].append(record.get(c))
        if lineno is not None and any(_has_surrogate(record.get(c)) for c in columns):
            info["n_surrogate_lines"] += 1
            if len(info["surrogate_lines"]) < _SHOWN:
                info["surrogate_lines"].append(lineno)
    if not any(table[c] for c in columns) and not fields:
        raise DataError(f"{path} has no readable record (skipped lines: {info['skipped_lines']}); check the file.")
    table["__fields__"] = sorted(fields)
    return table, info


def _records(path: Path, encoding: str, columns: list[str]):
    """``(line, record, problem)`` per record (only the ``columns`` fields are checked) (line None inside a ``.json`` array): ``problem`` is None
    or why the line is unusable."""
    if path.suffix.lower() == ".json":
        text = path.read_text(encoding=encoding)
        if text.lstrip()[:1] == "[":
            try:
                rows = json.loads(text)
            except json.JSONDecodeError as err:
                raise DataError(f"Could not read {path} as JSON: {json_error_text(err, with_line=True)}. "
                                "Fix that place (a .json file needs an array of objects).") from err
            for i, row in enumerate(rows):
                if not isinstance(row, dict):
                    raise DataError(f"{path}: item {i + 1} (1-based) of the JSON array is a {type(row).__name__}, "
                                    'not an object like {"text": ..., "label": ...}; fix that item.')
                yield None, row, None
            return
    for lineno, row, problem in json_lines(path, encoding):
        nested = [] if problem else [k for k, v in row.items() if k in columns and isinstance(v, (dict, list))]
        if nested:
            problem = f"line {lineno}: field {nested[0]!r} is {_a(_json_kind(row[nested[0]]))}; use a string or a number"
        yield (lineno, None, problem) if problem else (lineno, row, None)
