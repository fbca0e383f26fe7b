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
