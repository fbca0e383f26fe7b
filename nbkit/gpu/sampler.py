"""A daemon thread that calls ``read()`` every ``interval`` seconds on a fixed grid (a slow read skips
ticks, never drifts or bunches them), keeping a bounded history; listeners run on that thread.
"""
from __future__ import annotations

import atexit
import threading
import time
import warnings
import weakref
from collections import deque
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Sampler(Generic[T]):
    """Call ``read()`` every ``interval`` s (> 0; 1 s is nvidia-smi's ``utilization.gpu`` period) and pass each sample
    to ``listeners``; :attr:`history` keeps the last ``maxlen``. Reads keep to the grid ``start + k x interval``, never
    closer than ``interval / 2``. A read or listener that raises does not stop sampling: :attr:`errors` counts,
    :attr:`last_error` keeps the last, ``repr`` shows both, the first is warned (``RuntimeWarning``). :meth:`close`
    runs at exit.

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
        self.busy_s = 0.0         # CPU seconds (thread_time) spent in read() and listeners
        self._errors = 0
        self._last_error: BaseException | None = None
        self._last_error_where = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        ref = weakref.ref(self)   # atexit holds only a weak reference: a dropped sampler can be collected
        self._atexit = lambda: (s := ref()) is not None and s.close()
        atexit.register(self._atexit)

    @staticmethod
    def check_args(interval: float, maxlen: int) -> None:
        """Raise ``nbkit.errors.ConfigError`` unless interval > 0 (seconds) and maxlen >= 1."""
        from nbkit.errors import ConfigError

        if not interval > 0:
            raise ConfigError(f"interval must be > 0 seconds, got {interval!r}; use e.g. 1.0")
        if maxlen < 1:
            raise ConfigError(f"maxlen must be >= 1, got {maxlen!r}; use e.g. 600")

    @property
    def running(self) -> bool:
        """True while the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def errors(self) -> int:
        """Reads and listener calls that raised."""
        with self._lock:
            return self._errors

    @property
    def last_error(self) -> BaseException | None:
        """The last exception a read or listener raised (None: none yet)."""
        with self._lock:
            return self._last_error

    def error_text(self) -> str | None:
        """``"3 errors, last: listener update raised ValueError: bad view"``, or None without errors."""
        with self._lock:
            if not self._errors:
                return None
            exc = self._last_error
            return (f"{self._errors} error{'s' if self._errors != 1 else ''}, last: {self._last_error_where} "
                    f"raised {type(exc).__name__}: {exc}")

    def _record(self, where: str, exc: BaseException) -> None:
        with self._lock:
            self._errors += 1
            self._last_error, self._last_error_where = exc, where
            first = self._errors == 1
        if first:
            warnings.warn(f"nbkit Sampler: {where} raised {type(exc).__name__}: {exc}; sampling goes on "
                          "(Sampler.errors counts such errors, Sampler.last_error keeps the last)",
                          RuntimeWarning, stacklevel=2)

    def sample_once(self) -> T | None:
        """Read one sample now on the caller's thread, store it and notify listeners (None: the read raised)."""
        t0 = time.thread_time()  # CPU time of this thread: waiting for the GIL is not counted
        try:
            s = self.read()
        except Exception as exc:
            self._record("read", exc)
            s = None
        else:
            with self._lock:
                self.history.append(s)
                self.count += 1
            for fn in list(self.listeners):
                try:
                    fn(s)
                except Exception as exc:  # a broken view must not stop sampling
                    self._record(f"listener {getattr(fn, '__name__', repr(fn))}", exc)
        with self._lock:
            self.busy_s += time.thread_time() - t0
        return s

    def _run(self) -> None:
        t0 = time.monotonic()
        k = 0
        while not self._stop.is_set():
            self.sample_once()
            now = time.monotonic()
            k = max(k + 1, int((now - t0) / self.interval) + 1)
            if t0 + k * self.interval - now < self.interval / 2:   # a late tick skips a slot it nearly reached
                k += 1
            self._stop.wait(max(0.0, t0 + k * self.interval - time.monotonic()))

    def start(self) -> "Sampler[T]":
        """Start the thread (no-op if running); return self. Raises ``ConfigError`` once closed."""
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
        err = self.error_text()
        return (f"Sampler(interval={self.interval:g}s, maxlen={self.history.maxlen}, {state}"
                + (f"; {err}" if err else "") + ")")
