"""One preparation per store folder at a time (:class:`StoreLock`), and who holds it.

Two preparations writing one folder (two jobs on one raw corpus share ``runs/corpus/<name>-<hash>``)
delete and rename each other's part files. ``prepare_corpus`` holds this lock from checking the folder
to writing ``manifest.json``; a second one waits, naming the holder, then finds the store finished
(reused) or stopped (continued). The same scheme as :mod:`nbkit.train.run_lock`, which refuses instead
of waiting (two training runs must not share a folder; two preparations of one store can).
"""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from nbkit import jsonio
from nbkit.errors import ConfigError

LOCK_NAME, HOLDER_NAME = ".nbkit-prepare.lock", ".nbkit-prepare.json"   # beside the store's files, never wiped
_REPORT_EVERY_S = 300.0   # a waiting preparation says it still waits this often


class StoreLock:
    """One preparation per store folder at a time: hold it while writing ``out_dir``.

    ``filelock.FileLock`` on ``out_dir/.nbkit-prepare.lock`` (``flock(2)``: the kernel drops it when the
    holder exits, even by SIGKILL, so a killed preparation never leaves a stale lock); the holder's pid,
    host and start time (UTC) are in ``.nbkit-prepare.json`` beside it. :meth:`acquire` waits for another
    holder, printing a line on stderr that names it (and again every 5 min).

    Raises (:meth:`acquire`):
        ConfigError: the holder is this process (a second call while the first still runs would wait for
            itself).
    """

    def __init__(self, out_dir: Path):
        self.out = Path(out_dir)
        self._lock = None

    def _record(self) -> dict:
        try:
            h = jsonio.loads_strict((self.out / HOLDER_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return h if isinstance(h, dict) else {}

    def holder(self) -> str:
        """Who holds the lock, as text (``pid 123 on host h (started ... UTC)``)."""
        h = self._record()
        if "pid" not in h:
            return "another process (it has not written its pid yet)"
        return f"pid {h['pid']} on host {h.get('host')} (started {h.get('started')} UTC)"

    def _mine(self) -> bool:
        h = self._record()
        return h.get("pid") == os.getpid() and h.get("host") == socket.gethostname()

    def acquire(self) -> StoreLock:
        from filelock import FileLock, Timeout

        self.out.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.out / LOCK_NAME), timeout=0, thread_local=False)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if self._mine():
                raise ConfigError(f"{self.out} is being prepared by this process already ({self.holder()}); one "
                                  "preparation per store at a time: wait for that call to finish, or pass another "
                                  "out_dir") from None
            t0 = time.monotonic()
            print(f"[prepare-corpus] {self.out} is being prepared by another process: {self.holder()}; waiting for "
                  "that preparation to finish (its lock is released when it exits, even if killed), then this one "
                  "reuses the finished store, or continues it", file=sys.stderr, flush=True)
            while True:
                try:
                    lock.acquire(timeout=_REPORT_EVERY_S)
                    break
                except Timeout:
                    print(f"[prepare-corpus] still waiting for the preparation of {self.out} by {self.holder()} "
                          f"({(time.monotonic() - t0) / 60:.0f} min)", file=sys.stderr, flush=True)
        self._lock = lock
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        jsonio.write_json(self.out / HOLDER_NAME, holder, indent=None)   # atomic: temp file + rename
        return self

    def release(self) -> None:
        if self._lock is None:
            return
        if self._mine():
            (self.out / HOLDER_NAME).unlink(missing_ok=True)
        self._lock.release()
        self._lock = None

    def __enter__(self) -> StoreLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
