"""Stop a worker whose launcher is gone: ``kill -9`` of torchrun must not leave workers training.

torchrun's agent stops its workers when it is told to (SIGINT, SIGTERM), but a SIGKILL gives it
no chance: the workers are reparented (to PID 1 or the nearest subreaper), keep their process
group among themselves, train to the end and write ``model/``. So every worker started by a
launcher runs :func:`watch_launcher` (``nbkit.train.ddp.group.init_distributed`` and the
``Loop`` call it): a daemon thread that checks ``os.getppid()`` every ``interval_s`` seconds.

Why a ``getppid`` watchdog and not ``prctl(PR_SET_PDEATHSIG)``:

* the death signal fires when the *thread* that forked the worker exits, not its process: torch's
  agent supports running off the main thread (``torch.distributed.elastic.multiprocessing.api``
  checks for it), and a launcher that starts workers from a helper thread would have them
  killed while it is alive;
* it is set by the worker after it started, so a launcher that died before that is missed unless
  ``getppid`` is checked anyway; it is Linux-only; and it delivers a bare signal that either ends
  the process mid-step (SIGTERM/SIGKILL: no message, no cleanup) or needs a handler that competes
  with torchrun's own SIGTERM on failure;
* ``getppid`` changes on every POSIX system when the parent dies, whichever thread started the
  worker, inside containers too (torchrun as PID 1: the value recorded at start is compared, so a
  parent that *is* PID 1 is fine). Cost: one system call per ``interval_s``.

What happens then: :func:`orphaned` becomes True, the main thread gets a ``KeyboardInterrupt`` (as
for Ctrl-C: the jobs print one line saying where the run stopped and how to resume; a checkpoint
being written is discarded whole, ``nbkit.atomic``), and if the process still runs ``grace_s``
later (its main thread blocked in a collective whose peer is gone, or in C code) it ends with
``os._exit(EXIT_CODE)``. ``NBKIT_LAUNCHER_WATCH=0`` turns the watch off.

Limits: it watches the direct parent. A wrapper between torchrun and Python (``torchrun
--no-python sh -c ...``) is the parent then, and is watched instead of torchrun.
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
    """A daemon thread that calls ``on_gone()`` once when ``getppid()`` differs from its first value.

    Args:
        interval_s: seconds between checks (how late a dead launcher is noticed, at most).
        grace_s: seconds between interrupting the main thread and ``os._exit(EXIT_CODE)``.
        getppid: the parent-PID function (tests pass a fake); default ``os.getppid``.
        on_gone: what to do (default :meth:`stop_process`); called in this thread.
    """

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
    """True when a launcher that should be watched started this process (torchrun's marker, or
    ``NBKIT_DISTRIBUTED=1`` with ``WORLD_SIZE`` > 1: srun, mpirun), and the watch is not disabled."""
    from nbkit.train.ddp.rendezvous import NO, OPT_IN_ENV, TORCHRUN_MARKER, YES

    env = os.environ if env is None else env
    if (env.get(ENV) or "").strip().lower() in NO:
        return False
    if env.get(TORCHRUN_MARKER):                     # torchrun's agent sets it for every worker
        return True
    return (env.get(OPT_IN_ENV) or "").strip().lower() in YES and \
        (env.get("WORLD_SIZE") or "1").strip() not in ("", "0", "1")


def watch_launcher(interval_s: float = 0.5, grace_s: float = 5.0, env=None) -> "LauncherWatch | None":
    """Start the process's one watch when a launcher started it (:func:`launched_worker`); idempotent.

    Returns the running :class:`LauncherWatch`, or None in a notebook kernel or a plain ``python``.
    """
    global _watch
    if not launched_worker(env):
        return None
    with _lock:
        if _watch is None or not _watch.is_alive():
            _watch = LauncherWatch(interval_s, grace_s)
            _watch.start()
        return _watch


def orphaned() -> bool:
    """True once the watch saw this process's launcher die (the jobs word their last line by it)."""
    return _watch is not None and _watch.gone.is_set()
