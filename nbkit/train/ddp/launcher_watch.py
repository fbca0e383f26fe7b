"""Stop a worker whose launcher is gone: ``kill -9`` of torchrun must not leave workers training.

A daemon thread compares ``os.getppid()`` with its first value every ``interval_s`` s; once the parent
is gone the main thread gets a ``KeyboardInterrupt`` (the jobs' Ctrl-C line), and a process still
alive ``grace_s`` later (blocked in a collective) ends with ``os._exit(EXIT_CODE)``.
``NBKIT_LAUNCHER_WATCH=0`` turns it off. Why ``getppid`` and not ``PR_SET_PDEATHSIG``, and its limits:
``docs/distributed.md``, "Stopping a job".
"""
from __future__ import annotations

import os
import threading
import time

EXIT_CODE = 130          # as an interrupt: the launcher's end stopped the run
ENV = "NBKIT_LAUNCHER_WATCH"

_lock = threading.Lock()
_watch: "LauncherWatch | None" = None


class LauncherWatch(threading.Thread):
    """A daemon thread that calls ``on_gone()`` (default :meth:`stop_process`) once when ``getppid()`` differs
    from its first value, checked every ``interval_s`` s; ``grace_s``: s from interrupting the main thread to
    ``os._exit(EXIT_CODE)``."""

    def __init__(self, interval_s: float = 0.5, grace_s: float = 5.0, getppid=os.getppid, on_gone=None):
        super().__init__(name="nbkit-launcher-watch", daemon=True)
        self.interval_s, self.grace_s, self._getppid = float(interval_s), float(grace_s), getppid
        self.parent = getppid()
        self.gone = threading.Event()
        self._on_gone = on_gone or self.stop_process

    def run(self) -> None:
        while not self.gone.is_set():
            time.sleep(self.interval_s)
            if self._getppid() != self.parent:
                self.gone.set()
                self._on_gone()

    def stop_process(self) -> None:
        """Interrupt the main thread (``KeyboardInterrupt``), then end the process after ``grace_s``."""
        import _thread

        _thread.interrupt_main()
        time.sleep(self.grace_s)
        os._exit(EXIT_CODE)


def launched_worker(env=None) -> bool:
    """True when a launcher started this process (torchrun's marker, or ``NBKIT_DISTRIBUTED=1`` with
    ``WORLD_SIZE`` > 1: srun, mpirun) and ``NBKIT_LAUNCHER_WATCH`` does not turn the watch off.
    """
    from nbkit.train.ddp.rendezvous import NO, OPT_IN_ENV, TORCHRUN_MARKER, YES

    env = os.environ if env is None else env
    if (env.get(ENV) or "").strip().lower() in NO:
        return False
    if env.get(TORCHRUN_MARKER):                     # torchrun's agent sets it for every worker
        return True
    return (env.get(OPT_IN_ENV) or "").strip().lower() in YES and \
        (env.get("WORLD_SIZE") or "1").strip() not in ("", "0", "1")


def watch_launcher(interval_s: float = 0.5, grace_s: float = 5.0, env=None) -> "LauncherWatch | None":
    """Start the process's one watch when :func:`launched_worker` (idempotent); the running watch, or None.

    Called from the main thread, it also undoes an inherited ``SIGINT`` ignore (a job started with ``&``), so
    the launcher's death still reaches the main thread as ``KeyboardInterrupt``."""
    global _watch
    if not launched_worker(env):
        return None
    import signal

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started from a background shell (`cmd &`, nohup): SIGINT is inherited as ignored, and the watch's
        # interrupt would do nothing (the process would only end by os._exit after grace_s, without a checkpoint)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with _lock:
        if _watch is None or not _watch.is_alive():
            _watch = LauncherWatch(interval_s, grace_s)
            _watch.start()
        return _watch


def orphaned() -> bool:
    """True once the watch saw this process's launcher die (the jobs word their last line by it)."""
    return _watch is not None and _watch.gone.is_set()
