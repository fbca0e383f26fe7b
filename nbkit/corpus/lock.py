"""One preparation per store folder at a time: ``prepare_corpus`` holds :class:`StoreLock` from checking the
folder to writing ``manifest.json``, since two preparations (two jobs on one raw corpus) delete and rename
each other's part files."""
from __future__ import annotations

import sys
import time

from nbkit.errors import ConfigError
from nbkit.folder_lock import FolderLock

REPORT_EVERY_S = 300.0   # a waiting preparation says it still waits this often


class StoreLock(FolderLock):
    """Waiting lock on a store folder (``.nbkit-prepare.lock``): a second preparation prints a line on stderr
    naming the holder (again every 5 min), waits, then reuses the finished store or continues a stopped one.

    Raises (``acquire``):
        ConfigError: the holder is this process (a second call would wait for itself).
    """

    LOCK_NAME, HOLDER_NAME = ".nbkit-prepare.lock", ".nbkit-prepare.json"   # beside the store's files, never wiped

    def busy(self, lock) -> None:
        from filelock import Timeout

        if self.holder_is_me():
            raise ConfigError(f"{self.folder} is being prepared by this process already ({self.holder()}); one "
                              "preparation per store at a time: wait for that call to finish, or pass another "
                              "out_dir")
        t0 = time.monotonic()
        print(f"[prepare-corpus] {self.folder} is being prepared by another process: {self.holder()}; waiting for "
              "that preparation to finish (its lock is released when it exits, even if killed), then this one "
              "reuses the finished store, or continues it", file=sys.stderr, flush=True)
        while True:
            try:
                lock.acquire(timeout=REPORT_EVERY_S)
                return
            except Timeout:
                print(f"[prepare-corpus] still waiting for the preparation of {self.folder} by {self.holder()} "
                      f"({(time.monotonic() - t0) / 60:.0f} min)", file=sys.stderr, flush=True)
