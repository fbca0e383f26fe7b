"""Exact deduplication over the whole corpus by 64-bit text hash, in about 8 bytes per kept text.

The hashes already seen live in one sorted ``numpy.uint64`` array (8 bytes each) plus a small Python
set of the newest ones, merged into the array every ``merge_every`` additions and at each part's end.
This set is the only state of the preparation that grows with the corpus: 8 bytes per kept text
(e.g. 56 MB for 7 M texts; twice that for a moment while merging). Two different texts share a
64-bit hash with probability about n²/2⁶⁵ (under 10⁻⁶ for 7 M texts), which would drop one of them.
"""
from __future__ import annotations

import numpy as np


class HashSet:
    """Set of uint64 hashes; :meth:`filter_new` keeps the first occurrence of each, in stream order."""

    def __init__(self, initial: np.ndarray | None = None, merge_every: int = 1 << 18):
        self.sorted = np.unique(initial.astype(np.uint64)) if initial is not None else np.zeros(0, np.uint64)
        self.recent: set[int] = set()
        self.merge_every = merge_every

    def __len__(self) -> int:
        return len(self.sorted) + len(self.recent)

    def filter_new(self, hashes: np.ndarray) -> np.ndarray:
        """Boolean mask of the hashes that are new, in order (a repeat within ``hashes`` is a duplicate too)."""
        if not len(hashes):
            return np.zeros(0, bool)
        if len(self.sorted):
            idx = np.minimum(np.searchsorted(self.sorted, hashes), len(self.sorted) - 1)
            seen = self.sorted[idx] == hashes
        else:
            seen = np.zeros(len(hashes), bool)
        keep = np.zeros(len(hashes), bool)
        for i, h in enumerate(hashes.tolist()):
            if not seen[i] and h not in self.recent:
                self.recent.add(h)
                keep[i] = True
        if len(self.recent) >= self.merge_every:
            self.merge()
        return keep

    def merge(self) -> None:
        """Fold the recent hashes into the sorted array."""
        if self.recent:
            new = np.fromiter(self.recent, dtype=np.uint64, count=len(self.recent))
            self.sorted = np.union1d(self.sorted, new)
            self.recent.clear()


def exclusion_hashes(texts, max_chars: int) -> np.ndarray:
    """Sorted unique hashes of ``texts`` as the writer would hash them (its ``exclude_texts`` setting).

    Each text goes through the writer's own steps before its hash: cut at ``max_chars`` at sentence
    ends (every piece is excluded), the validity rule (blank/missing give nothing), then the document
    key :func:`nbkit.corpus.worker.doc_key` (64-bit hash of the NFKC form, whatever the tokenizer). So a
    corpus line equal to an excluded text after that normalisation (full-width forms, a repaired
    surrogate) is dropped.

    Args:
        texts: an iterable of str (e.g. the labelled validation and test texts).
        max_chars: the store's ``max_chars`` setting.

    Returns:
        ``numpy.uint64`` array, sorted, no repeats (8 bytes per distinct text).

    Raises:
        ConfigError: ``texts`` is a single string (pass a list of texts).
    """
    from nbkit.corpus.worker import doc_key
    from nbkit.data.textrule import check_text, split_long
    from nbkit.errors import ConfigError

    if isinstance(texts, (str, bytes)):
        raise ConfigError("exclude_texts is one string; pass a list of texts (e.g. [text]), one per item")
    out = []
    for value in texts:
        pieces = split_long(value, max_chars) if isinstance(value, str) and len(value) > max_chars else [value]
        for piece in pieces:
            text = check_text(piece)
            if text is not None:
                out.append(doc_key(text))
    return np.unique(np.asarray(out, dtype=np.uint64))


def exclusion_identity(hashes: np.ndarray) -> dict | None:
    """What the manifest records of an exclusion list: ``{"n_hashes", "sha256"}`` of the sorted hashes
    (little-endian uint64 bytes), never the texts; ``None`` for no exclusion."""
    import hashlib

    if not len(hashes):
        return None
    digest = hashlib.sha256(np.asarray(hashes, dtype="<u8").tobytes()).hexdigest()
    return {"n_hashes": int(len(hashes)), "sha256": digest}
