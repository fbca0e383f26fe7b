"""jieba word boundaries for whole-word masking on text without gold ones (People's Daily has them).

Segmenting is slow (docs/corpus.md), so results are cached on disk by texts and jieba version.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nbkit import jsonio
from nbkit.errors import DataError


def _jieba():
    try:
        with warnings.catch_warnings():
            # jieba 0.42.1's invalid regex escapes and pkg_resources import warn: noise the user cannot fix
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
            import jieba
    except ImportError as exc:  # pragma: no cover - jieba is a dependency
        raise DataError("word boundaries need jieba: pip install jieba") from exc
    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict ..." lines in notebooks
    cache = os.environ.get("NBKIT_JIEBA_CACHE")  # its dictionary cache; else the temp dir (entrypoint sets it)
    if cache and jieba.dt.tmp_dir is None:
        os.makedirs(cache, exist_ok=True)
        jieba.dt.tmp_dir = cache
    return jieba


def segment(texts: Sequence[str]) -> list[list[str]]:
    """jieba words of each text without whitespace pieces: ``"我爱北京天安门"`` -> ``["我", "爱", "北京", "天安门"]``."""
    jieba = _jieba()
    return [[w for w in jieba.lcut(t) if w.strip()] for t in texts]


def cached_segment(texts: Sequence[str], cache_dir: str | Path | None) -> list[list[str]]:
    """:func:`segment` cached in ``cache_dir/words-<hash>.json`` (None: no cache); a corrupt file is rewritten."""
    if cache_dir is None:
        return segment(texts)
    h = hashlib.sha256(f"jieba {_jieba().__version__}\n".encode())   # keyed by the texts and jieba's version
    for t in texts:
        h.update(t.encode("utf-8") + b"\0")
    path = Path(cache_dir) / f"words-{h.hexdigest()[:24]}.json"
    if path.is_file():
        try:
            words = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(words, list) and len(words) == len(texts):
                return words
        except (OSError, ValueError):
            pass
    words = segment(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(path, words, indent=None)  # atomic: a temporary file, then renamed
    return words


def add_words(dataset: Any, text_column: str = "text", cache_dir: str | Path | None = None) -> Any:
    """``dataset`` with a ``words`` column (list[str]); rows with non-empty words keep them, the rest
    are segmented (for ``make_blocks(..., words_column="words")``).

    Raises:
        DataError: no ``text_column``.
    """
    if text_column not in dataset.column_names:
        raise DataError(f"no {text_column!r} column to segment; columns: {dataset.column_names}")
    texts = dataset[text_column]
    if "words" in dataset.column_names:
        have = dataset["words"]
        todo = [i for i, w in enumerate(have) if not w]
        new = dict(zip(todo, cached_segment([texts[i] for i in todo], cache_dir)))
        words = [new.get(i, w) for i, w in enumerate(have)]
        dataset = dataset.remove_columns("words")
    else:
        words = cached_segment(texts, cache_dir)
    return dataset.add_column("words", words)
