"""One writer per folder: a ``filelock`` on ``<folder>/<name>.lock`` and the holder's record beside it.

``flock(2)`` is released by the kernel when the holder exits, even by SIGKILL, so a killed writer never leaves
a stale lock. The holder (``pid``, ``host``, ``started`` UTC) is written to ``<name>.json`` (strict JSON,
atomic) so the next writer can name it. Training runs refuse a held folder (:class:`nbkit.train.run_lock.RunLock`);
corpus preparations wait for it (:class:`nbkit.corpus.prepare.StoreLock`).
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from filelock import FileLock, Timeout

from nbkit import jsonio


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists on this machine (signal 0; another user's counts, a zombie does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has exited: it writes nothing any more
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class FolderLock:
    """Exclusive lock on ``folder`` (created); nests within one object; a context manager.

    Subclasses set ``LOCK_NAME``/``HOLDER_NAME`` and say what to do when another process holds it
    (:meth:`busy`: raise, or wait with :meth:`wait_for`).
    """

    LOCK_NAME = ".nbkit.lock"
    HOLDER_NAME = ".nbkit.json"

    def __init__(self, folder):
        self.folder = Path(folder)
        self._lock = None
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._depth > 0

    def record(self) -> dict:
        """The holder's record (``pid``, ``host``, ``started``), ``{}`` when absent or unreadable."""
        try:
            h = json.loads((self.folder / self.HOLDER_NAME).read_text())
        except (OSError, ValueError):
            return {}
        return h if isinstance(h, dict) else {}

    def holder(self) -> str:
        """Who holds the lock, as text: ``pid 123 on host h (started ... UTC)``."""
        h = self.record()
        if "pid" not in h:
            return "another process (it has not written its pid yet)"
        return f"pid {h['pid']} on host {h.get('host')} (started {h.get('started', '?')} UTC)"

    def holder_is_me(self) -> bool:
        h = self.record()
        return h.get("pid") == os.getpid() and h.get("host") == socket.gethostname()

    def busy(self, lock) -> None:
        """Another process holds ``lock`` (a ``filelock.FileLock``): raise, or take it by waiting (hook)."""
        raise NotImplementedError

    def acquire(self):
        if self._depth:
            self._depth += 1
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.folder / self.LOCK_NAME), timeout=0, thread_local=False)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            self.busy(lock)        # raises, or returns holding the lock
        self._lock, self._depth = lock, 1
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        jsonio.write_json(self.folder / self.HOLDER_NAME, holder, indent=None)
        return self

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            return
        if self.holder_is_me():
            (self.folder / self.HOLDER_NAME).unlink(missing_ok=True)
        self._lock.release()
        self._lock = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
