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


def spawn_blocker() -> str | None:
    """Why worker processes cannot start here, or None. A spawned worker re-imports the parent's
    ``__main__`` from its file; a script read from standard input (``python - <<EOF``) names the file
    ``<stdin>``, so every worker dies at start and ``multiprocessing.Pool`` replaces it forever (a hang).
    A notebook kernel or ``python -c`` has no ``__main__`` file and spawns fine."""
    import sys

    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if path and not os.path.isfile(path):
        return f"the main script {path!r} is not a file a worker process can import (read from standard input?)"
    return None


class Workers:
    """``num_workers`` processes (none for 1: the work runs in this process). Use as a context manager.

    Where workers cannot start (:func:`spawn_blocker`) it warns once and runs in this process.
    """

    def __init__(self, num_workers: int):
        self.n = max(1, int(num_workers))
        self._pool = None
        why = spawn_blocker() if self.n > 1 else None
        if why:
            import warnings

            warnings.warn(f"num_workers={self.n}: {why}, so the corpus is prepared in this one process. To use "
                          f"{self.n} workers, save the script to a .py file and run it (the code under "
                          "if __name__ == '__main__':).", UserWarning, stacklevel=3)
            self.n = 1

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
