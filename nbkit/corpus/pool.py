"""An ordered, bounded parallel map over the chunk stream (``Pool.imap`` would read the whole input ahead).

At most ``2 * num_workers`` chunks are in flight, so memory stays flat however large the corpus;
results come back in input order, so the output never depends on the number of workers. Workers are
spawned (not forked: the parent may hold a tokenizer's Rust thread pool) and run single-threaded
(``TOKENIZERS_PARALLELISM=false``).
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from nbkit.corpus import worker


def _init() -> None:
    import signal

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C reaches the main process, which ends the pool


class Workers:
    """``num_workers`` processes (none for 1: the work runs in this process). Use as a context manager."""

    def __init__(self, num_workers: int):
        self.n = max(1, int(num_workers))
        self._pool = None

    def __enter__(self) -> Workers:
        if self.n > 1:
            import multiprocessing as mp

            self._pool = mp.get_context("spawn").Pool(self.n, initializer=_init)
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def map(self, mode: str, items: Iterable[Any], settings: dict, paths: list[str]) -> Iterator[tuple[Any, Any]]:
        """``(item, result)`` in order; items without ``items`` attribute (file problems) pass with None."""
        if self._pool is None:
            for item in items:
                yield item, (worker.run((mode, item, settings, paths[item.source]))
                             if hasattr(item, "items") else None)
            return
        pending: deque = deque()
        for item in items:
            job = (self._pool.apply_async(worker.run, ((mode, item, settings, paths[item.source]),))
                   if hasattr(item, "items") else None)
            pending.append((item, job))
            while len(pending) > 2 * self.n or (pending and pending[0][1] is None):
                done, job = pending.popleft()
                yield done, job.get() if job is not None else None
        while pending:
            done, job = pending.popleft()
            yield done, job.get() if job is not None else None
