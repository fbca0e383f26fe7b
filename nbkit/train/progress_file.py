"""The loop's progress in a small JSON file, for a watcher outside the kernel.

``nbkit run-notebooks`` runs each notebook in a kernel it cannot look into: while one cell
trains for 40 minutes, its log could only say "still running cell 15". It therefore names a
file in ``NBKIT_PROGRESS_FILE`` for the kernel, every :class:`nbkit.train.loop.Loop` built in
that kernel installs a :class:`ProgressFile` callback (:func:`with_env_progress`), and the
runner's heartbeat reads the file (``nbkit.cli.run_notebooks.loop_status``). The file, written
atomically through :mod:`nbkit.jsonio` at most once per ``every_s`` seconds::

    {"step": 12, "total": 40, "loss": 3.21, "elapsed_s": 30.5, "eta_s": 71.2,
     "updated": 1764590000.0, "done": false}

``loss`` is the last logged training loss (None before the first log), ``elapsed_s`` the
seconds since ``fit()`` began, ``eta_s`` the remaining steps at this run's mean rate so far
(None before a step), ``updated`` Unix seconds. Only the main process writes (the loop
emits callbacks on rank 0 only).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "NBKIT_PROGRESS_FILE"


class ProgressFile:
    """Loop callback: the step / total, loss and ETA of the running ``fit()`` in a JSON file.

    Args:
        path: the file to (over)write; its folder must exist.
        every_s: least seconds between two writes while training (the first and last always write).

    A failed write (disk full, folder removed) is ignored: progress reporting must never stop training.
    """

    def __init__(self, path: str | Path, every_s: float = 1.0):
        self.path, self.every_s = Path(path), every_s
        self._t0 = self._last = 0.0
        self._step0, self._loss = 0, None

    def on_train_begin(self, loop) -> None:
        self._t0, self._step0, self._loss = time.monotonic(), loop.state.step, None
        self._write(loop)

    def on_step_end(self, loop) -> None:
        if time.monotonic() - self._last >= self.every_s:
            self._write(loop)

    def on_log(self, loop, logs: dict) -> None:
        self._loss = logs.get("loss")

    def on_train_end(self, loop, result) -> None:
        self._write(loop, done=True)

    def status(self, loop, done: bool = False) -> dict:
        """The payload written now (see the module docstring)."""
        step, total = loop.state.step, loop.config.max_steps
        elapsed = time.monotonic() - self._t0
        done_here = step - self._step0  # a resumed run's earlier steps took no time here
        eta = (total - step) * elapsed / done_here if done_here > 0 else None
        return {"step": step, "total": total, "loss": self._loss, "elapsed_s": round(elapsed, 1),
                "eta_s": None if eta is None else round(eta, 1), "updated": time.time(), "done": done}

    def _write(self, loop, done: bool = False) -> None:
        from nbkit.errors import WriteError
        from nbkit.jsonio import write_json

        self._last = time.monotonic()
        try:
            write_json(self.path, self.status(loop, done), indent=None)
        except (OSError, WriteError):   # write_json reports a full disk as WriteError: never stop training for it
            pass


def with_env_progress(callbacks: list) -> list:
    """``callbacks`` plus a :class:`ProgressFile` when ``$NBKIT_PROGRESS_FILE`` names a file (and none is there)."""
    path = os.environ.get(ENV)
    if path and not any(isinstance(cb, ProgressFile) for cb in callbacks):
        return [*callbacks, ProgressFile(path)]
    return callbacks
