"""One training run per ``output_dir``: a lock the run holds, and who holds it.

Two runs in one ``output_dir`` prune and overwrite each other's checkpoints, so ``Loop.fit()``/``save()``
hold :class:`RunLock` (rank 0 only under DDP). It is ``filelock`` on ``output_dir/.nbkit-run.lock``
(``flock(2)``: released by the kernel when the holder dies, even by SIGKILL); the holder (``pid``,
``host``, ``started`` UTC ISO 8601) is written beside it in ``.nbkit-run.json``.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from nbkit import jsonio
from nbkit.errors import ConfigError

LOCK_NAME = ".nbkit-run.lock"
HOLDER_NAME = ".nbkit-run.json"


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists on this machine (signal 0; a process of another
    user counts as alive, a zombie does not)."""
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


def read_holder(output_dir) -> dict | None:
    """The holder record of ``output_dir`` (``pid``, ``host``, ``started``), None if absent or unreadable."""
    try:
        return json.loads((Path(output_dir) / HOLDER_NAME).read_text())
    except (OSError, ValueError):
        return None


class RunLock:
    """Exclusive, non-blocking lock on ``output_dir``; a context manager. ``acquire()`` creates ``output_dir``,
    nests within one object, and raises ``ConfigError`` naming the holder and the fixes when another holds it.
    """

    def __init__(self, output_dir):
        self.output_dir = Path(output_dir)
        self._lock = None
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._depth > 0

    def acquire(self) -> "RunLock":
        from filelock import FileLock, Timeout

        if self._depth:
            self._depth += 1
            return self
        self.output_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.output_dir / LOCK_NAME), timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            raise ConfigError(self._busy_message()) from None
        self._lock, self._depth = lock, 1
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        jsonio.write_json(self.output_dir / HOLDER_NAME, holder, indent=None)  # atomic: temp file + rename
        return self

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            return
        holder = read_holder(self.output_dir)
        if holder and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
            (self.output_dir / HOLDER_NAME).unlink(missing_ok=True)
        self._lock.release()
        self._lock = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()

    def _busy_message(self) -> str:
        h = read_holder(self.output_dir) or {}
        pid, host = h.get("pid"), h.get("host")
        who = (f"pid {pid} on host {host} (started {h.get('started', '?')} UTC)" if pid is not None
               else "another process (it has not written its pid yet)")
        here = " - this process" if pid == os.getpid() and host == socket.gethostname() else ""
        return (f"output_dir={str(self.output_dir)!r} is in use by another training run: {who}{here}. Two runs "
                "in one output_dir overwrite and prune each other's checkpoints. Wait for that run to finish "
                "(or stop it), or give this run its own output_dir. The lock is released when its holder "
                f"exits, even if killed (file {self.output_dir / LOCK_NAME}).")
