"""An ordered, bounded parallel map over the chunk stream: at most ``2 * num_workers + 1`` chunks in flight
(memory flat), results in input order (output independent of the worker count). Each spawned worker has its own
pipes, and the parent waits on their result pipes and process sentinels together, so a killed worker is
:class:`WorkerDied` at once (``multiprocessing.Pool`` would wait for its lost task for ever).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from multiprocessing.connection import wait
from typing import Any

from nbkit.corpus import worker
from nbkit.errors import NbkitError


class WorkerDied(NbkitError):
    """A corpus worker process ended during the preparation (``pid``, ``exitcode``: ``-9`` for SIGKILL)."""

    def __init__(self, message: str, pid: int, exitcode: int | None):
        super().__init__(message)
        self.pid, self.exitcode = pid, exitcode


def _serve(tasks, results) -> None:
    """A worker's loop: ``(seq, task)`` in, ``(seq, result, exception)`` out; ends on None or a closed pipe."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C reaches the main process, which ends the workers
    while True:
        try:
            msg = tasks.recv()
        except (EOFError, OSError):   # the parent is gone
            return
        if msg is None:
            return
        seq, task = msg
        try:
            out = (seq, worker.run(task), None)
        except Exception as exc:  # noqa: BLE001  (re-raised in the parent, at this chunk's place in the order)
            out = (seq, None, exc)
        try:
            results.send(out)
        except (BrokenPipeError, EOFError, OSError):
            return
        except Exception as exc:  # noqa: BLE001  (it does not pickle: send the text of what went wrong)
            bad = out[2] if out[2] is not None else exc
            results.send((seq, None, RuntimeError(f"{type(bad).__name__}: {bad}")))


def spawn_blocker() -> str | None:
    """Why worker processes cannot start here, or None: a spawned worker re-imports ``__main__`` from its file,
    which a script read from standard input (``python - <<EOF``) lacks."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if path and not os.path.isfile(path):
        return f"the main script {path!r} is not a file a worker process can import (read from standard input?)"
    return None


class _Proc:
    """One worker: its process, its task pipe (fed by a thread: a large task never blocks the parent), its
    result pipe and the chunks it holds (``seq -> (chunk, path)``)."""

    def __init__(self, ctx, index: int):
        self.index = index
        task_r, self.tasks = ctx.Pipe(duplex=False)
        self.results, result_w = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_serve, args=(task_r, result_w), daemon=True,
                                   name=f"nbkit-corpus-worker-{index}")
        self.process.start()
        task_r.close()      # the parent keeps only its ends: a dead peer then reads as EOF on both sides
        result_w.close()
        self.held: dict[int, tuple[Any, str]] = {}
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        self._feeder = threading.Thread(target=self._feed, daemon=True, name=f"nbkit-corpus-feed-{index}")
        self._feeder.start()

    def _feed(self) -> None:
        while (msg := self._out.get()) is not None:
            try:
                self.tasks.send(msg)
            except OSError:   # the worker died (the parent's wait names it) or the pipe was closed
                return

    def submit(self, seq: int, task: tuple, chunk, path: str) -> None:
        self.held[seq] = (chunk, path)
        self._out.put((seq, task))

    def close(self) -> None:
        """End the process (SIGTERM: it holds nothing to save) and the feeder; close the pipes."""
        self._out.put(None)
        if self.process.is_alive():
            self.process.terminate()
        self.process.join(5)
        if self.process.is_alive():  # pragma: no cover - SIGTERM ignored
            self.process.kill()
            self.process.join(5)
        self._feeder.join(5)        # it ends on None, or on EPIPE from the ended process
        for conn in (self.tasks, self.results):
            conn.close()


class Workers:
    """``num_workers`` spawned processes (none for 1, or where :func:`spawn_blocker` says they cannot start:
    then it warns and works in this process). A context manager.

    Raises (from :meth:`map`):
        WorkerDied: a worker was killed or exited (its pid, signal or exit code, the chunk it held and the fix).
    """

    def __init__(self, num_workers: int):
        self.n = max(1, int(num_workers))
        self._procs: list[_Proc] = []
        self._done: dict[int, tuple[Any, BaseException | None]] = {}
        self._seq = 0
        why = spawn_blocker() if self.n > 1 else None
        if why:
            warnings.warn(f"num_workers={self.n}: {why}, so the corpus is prepared in this one process. To use "
                          f"{self.n} workers, save the script to a .py file and run it (the code under "
                          "if __name__ == '__main__':).", UserWarning, stacklevel=3)
            self.n = 1

    def __enter__(self) -> Workers:
        if self.n > 1:
            ctx = mp.get_context("spawn")
            try:
                for i in range(self.n):
                    self._procs.append(_Proc(ctx, i))
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        for p in self._procs:
            p.close()
        self._procs, self._done = [], {}

    def map(self, mode: str, items: Iterable[Any], settings: dict, paths: list[str]) -> Iterator[tuple[Any, Any]]:
        """``(item, result)`` in order; items without ``items`` attribute (file problems) pass with None."""
        pending: deque = deque()
        for item in items:
            task = (mode, item, settings, paths[item.source]) if hasattr(item, "items") else None
            if not self._procs:
                yield item, (worker.run(task) if task else None)
                continue
            seq = None
            if task:
                seq, self._seq = self._seq, self._seq + 1
                min(self._procs, key=lambda p: len(p.held)).submit(seq, task, item, paths[item.source])
            pending.append((item, seq))
            while len(pending) > 2 * self.n or (pending and pending[0][1] is None):
                done, seq = pending.popleft()
                yield done, (self._result(seq) if seq is not None else None)
        while pending:
            done, seq = pending.popleft()
            yield done, (self._result(seq) if seq is not None else None)

    def _result(self, seq: int) -> Any:
        while seq not in self._done:
            by_conn = {p.results: p for p in self._procs}
            by_sentinel = {p.process.sentinel: p for p in self._procs}
            ready = wait([*by_conn, *by_sentinel])      # wakes on a result or on a worker's exit
            for r in ready:
                p = by_conn.get(r)
                if p is not None:
                    try:
                        got, res, exc = p.results.recv()
                    except (EOFError, OSError):   # its process ended: its sentinel says how
                        raise self._died(p) from None
                    p.held.pop(got, None)
                    self._done[got] = (res, exc)
            for r in ready:
                if r in by_sentinel:
                    raise self._died(by_sentinel[r])
        res, exc = self._done.pop(seq)
        if exc is not None:
            raise exc
        return res

    def _died(self, p: _Proc) -> WorkerDied:
        p.process.join(5)
        code = p.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "unknown signal"
            how = f"was killed by signal {-code} ({name})"
            why = (" SIGKILL with no one sending it is most often the kernel's out-of-memory killer "
                   "(`dmesg | grep -i oom` or `journalctl -k` says so)." if code == -signal.SIGKILL else "")
        else:
            how, why = f"exited with code {code}", " Its own error, if it raised one, is printed above it on stderr."
        held = ""
        if p.held:
            chunk, path = p.held[min(p.held)]
            last = chunk.first_line + len(chunk.items) - 1
            held = f" It held {len(p.held)} chunk(s) of work, the first {path} lines {chunk.first_line:,}-{last:,}."
        fewer = max(1, self.n // 2)
        fix = (f"Run the same preparation again with fewer workers (num_workers={fewer}; "
               f"now {self.n}: each holds a tokenizer and its chunks in memory) or with more memory"
               if code is not None and code < 0 else "Fix what its error names and run the same preparation again")
        return WorkerDied(
            f"corpus worker {p.index} (pid {p.process.pid}) {how} while preparing the corpus.{held}{why} "
            f"{fix}: the parts already complete are kept and it continues after them.", p.process.pid, code)
