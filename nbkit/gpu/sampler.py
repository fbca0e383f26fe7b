"""A background thread that calls a reader at a fixed interval, keeping a bounded history.

The sampler knows nothing about NVML or widgets: it calls ``read()`` every
``interval`` seconds (default 1 s, the period nvidia-smi's utilisation counter
is averaged over on most GPUs), appends the result to a ``deque(maxlen=...)``
and hands it to listeners (the widget, the training telemetry). Ticks are
scheduled on a fixed grid (``t0 + k * interval``) so a slow read does not make
the period drift; ticks that fall behind are skipped, not bunched.

Shutdown: the thread is a daemon, :meth:`close` is registered with ``atexit``
(ipykernel 6 and 7 run atexit hooks on kernel shutdown and restart), and stop
waits for the thread with a timeout. Listeners run on the sampler thread; with
ipykernel 7, ``print`` from such a thread goes to the cell that started it, so
views update widget traits instead of printing.
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Sampler(Generic[T]):
    """Call ``read()`` every ``interval`` seconds on a daemon thread.

    Args:
        read: returns one sample; an exception is counted in ``errors`` and the
            last one kept in ``last_error``, and the thread keeps going.
        interval: seconds between ticks (> 0).
        maxlen: samples kept in :attr:`history` (oldest dropped first).

    Raises:
        nbkit.errors.ConfigError: interval <= 0 or maxlen < 1.
    """

    def __init__(self, read: Callable[[], T], interval: float = 1.0, maxlen: int = 600):
        self.check_args(interval, maxlen)
        self.read = read
        self.interval = float(interval)
        self.history: deque[T] = deque(maxlen=maxlen)
        self.listeners: list[Callable[[T], Any]] = []
        self.count = 0            # samples taken since construction
        self.errors = 0           # reads or listeners that raised
        self.busy_s = 0.0         # CPU seconds (thread_time) spent in read() and listeners
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        # atexit holds only a weak reference, so a dropped sampler can be collected.
        ref = weakref.ref(self)
        self._atexit = lambda: (s := ref()) is not None and s.close()
        atexit.register(self._atexit)

    @staticmethod
    def check_args(interval: float, maxlen: int) -> None:
        """Raise ``nbkit.errors.ConfigError`` unless interval > 0 (seconds) and maxlen >= 1
        (callers that build other objects first, e.g. a widget, check before doing so)."""
        from nbkit.errors import ConfigError

        if not interval > 0:
            raise ConfigError(f"interval must be > 0 seconds, got {interval!r}; use e.g. 1.0")
        if maxlen < 1:
            raise ConfigError(f"maxlen must be >= 1, got {maxlen!r}; use e.g. 600")

    @property
    def running(self) -> bool:
        """True while the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def sample_once(self) -> T | None:
        """Read one sample now on the caller's thread, store it and notify listeners."""
        t0 = time.thread_time()  # CPU time of this thread: waiting for the GIL is not counted
        try:
            s = self.read()
        except Exception as exc:
            self.errors += 1
            self.last_error = exc
            self.busy_s += time.thread_time() - t0
            return None
        with self._lock:
            self.history.append(s)
            self.count += 1
        for fn in list(self.listeners):
            try:
                fn(s)
            except Exception as exc:  # a broken view must not kill sampling
                self.errors += 1
                self.last_error = exc
        self.busy_s += time.thread_time() - t0
        return s

    def _run(self) -> None:
        t0 = time.monotonic()
        k = 0
        while not self._stop.is_set():
            self.sample_once()
            k = max(k + 1, int((time.monotonic() - t0) / self.interval) + 1)
            self._stop.wait(max(0.0, t0 + k * self.interval - time.monotonic()))

    def start(self) -> "Sampler[T]":
        """Start the thread (no-op if running). Returns self.

        Raises:
            nbkit.errors.ConfigError: the sampler was closed.
        """
        from nbkit.errors import ConfigError

        if self._closed:
            raise ConfigError("this sampler was closed; create a new one")
        if not self.running:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="nbkit-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread and wait for it (at most ``timeout`` s, default interval + 5 s)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(self.interval + 5.0 if timeout is None else timeout)
        self._thread = None

    def close(self) -> None:
        """Stop for good and drop listeners; safe to call twice."""
        self.stop()
        self.listeners.clear()
        if not self._closed:
            self._closed = True
            atexit.unregister(self._atexit)

    def snapshot(self) -> list[T]:
        """A copy of the history, oldest first (safe while the thread appends)."""
        with self._lock:
            return list(self.history)

    def __enter__(self) -> "Sampler[T]":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else ("closed" if self._closed else "stopped")
        return f"Sampler(interval={self.interval:g}s, maxlen={self.history.maxlen}, {state})"
