"""What ``nbkit run-notebooks`` shows while a notebook runs.

One :class:`NotebookProgress` per notebook, fed by nbclient's cell hooks. Two
renderings of the same facts (cells done / total, elapsed time, the running
cell's first line):

* a terminal (``stream.isatty()``): a tqdm bar that redraws in place, refreshed
  every second by a heartbeat thread so the clock moves during a long cell;
* anything else (CI logs, ``| tee``, a file): plain lines, never a carriage
  return: one when a cell starts and a heartbeat every ``heartbeat_s`` seconds
  (default 10) while it runs, so a log shows life at least that often.

While a cell trains, both carry the training loop's own progress (``training step 12/40,
loss 3.21, ETA 1 min 11 s``), read from the JSON file that the runner names in
``NBKIT_PROGRESS_FILE`` for the kernel (:class:`nbkit.train.callbacks.ProgressFile` writes it).

The notebook's end (done or failed) is one line either way; the headline metric
in it comes from :mod:`nbkit.cli.summary`.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TextIO

from nbkit.units import fmt_duration  # noqa: F401  (re-exported)

SKIP_TAG = "skip-execution"  # nbclient's default skip_cells_with_tag


def first_line(source: str, width: int = 60) -> str:
    """The first non-blank line of a cell's source, cut to ``width`` characters with ``...``."""
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


def loop_status(path: str | Path | None, since: float) -> str | None:
    """``training step 12/40, loss 3.21, ETA 1 min 11 s`` from a progress file, or None.

    None when ``path`` is None, missing, unreadable or not strict JSON, when the run it
    describes is done, or when it was last written before ``since`` (Unix seconds: the running
    cell's start), so a loop of an earlier cell is never shown as this cell's.
    """
    if path is None:
        return None
    try:
        from nbkit.jsonio import loads_strict

        st = loads_strict(Path(path).read_text(encoding="utf-8"))
        if st.get("done") or float(st.get("updated", 0)) < since:
            return None
        text = f"training step {int(st['step'])}/{int(st['total'])}"
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if st.get("loss") is not None:
        text += f", loss {float(st['loss']):.4g}"
    if st.get("eta_s") is not None:
        text += f", ETA {fmt_duration(float(st['eta_s']))}"
    return text


def code_cells(nb) -> int:
    """How many cells nbclient will execute: code cells with source, not tagged ``skip-execution``."""
    return sum(1 for c in nb.cells if c.cell_type == "code" and c.source.strip()
               and SKIP_TAG not in c.get("metadata", {}).get("tags", []))


class NotebookProgress:
    """Live progress of one notebook, fed by nbclient's ``on_cell_execute`` / ``on_cell_executed`` hooks.

    Args:
        name: the notebook's file name, shown on every line.
        total: code cells to execute (:func:`code_cells`).
        stream: where to write (default ``sys.stdout``).
        tty: bar (True) or plain lines (False); default ``stream.isatty()``.
        heartbeat_s: seconds between heartbeat lines in plain mode (the bar redraws every second).
        status_file: the kernel's ``NBKIT_PROGRESS_FILE``; its training progress joins the
            heartbeat (:func:`loop_status`). None: cells only.

    Use as a context manager: ``__enter__`` starts the clock and the heartbeat
    thread, ``__exit__`` stops them. :meth:`finish` writes the closing line.
    """

    def __init__(self, name: str, total: int, stream: TextIO | None = None, tty: bool | None = None,
                 heartbeat_s: float = 10.0, status_file: str | Path | None = None):
        import sys

        self.name, self.total = name, total
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.heartbeat_s, self.status_file = heartbeat_s, status_file
        self.cell_wall0 = time.time()        # Unix start of the running cell (progress files older are stale)
        self.done = 0
        self.running = False                 # a cell is executing now
        self.cell_index: int | None = None   # nbclient's index (all cells, from 0) of the running cell
        self.cell_line = "starting the kernel"
        self.t0 = self.cell_t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None

    # --- nbclient hooks (NotebookClient on_cell_execute / on_cell_executed)
    def cell_started(self, cell, cell_index: int) -> None:
        """A code cell was sent to the kernel: show it (a line in plain mode)."""
        with self._lock:
            self.cell_index, self.cell_line, self.running = cell_index, first_line(cell.source), True
            self.cell_t0, self.cell_wall0 = time.monotonic(), time.time()
            if self._bar is not None:
                self._bar.set_postfix_str(self._running(), refresh=True)
            else:
                self._line(f"{self.done}/{self.total} done, {self._elapsed()}  running {self._running()}")

    def cell_finished(self, cell, cell_index: int, execute_reply=None) -> None:
        """A code cell finished (with or without an error): count it."""
        with self._lock:
            self.done += 1
            self.running = False
            if self._bar is not None:
                self._bar.update(1)

    # --- lifetime
    def __enter__(self) -> NotebookProgress:
        self.t0 = self.cell_t0 = time.monotonic()
        if self.tty:
            from tqdm.std import tqdm  # the console bar (tqdm.auto would pick a widget inside Jupyter)

            self._bar = tqdm(total=self.total, desc=self.name, unit="cell", file=self.stream, leave=False,
                             dynamic_ncols=True, mininterval=0.5,
                             bar_format="{desc} {n_fmt}/{total_fmt} cells |{bar:20}| {elapsed}{postfix}")
            self._bar.set_postfix_str(self.cell_line, refresh=True)
        else:
            self._line(f"start: {self.total} code cell{'s' if self.total != 1 else ''}")
        self._thread = threading.Thread(target=self._beat, name=f"progress-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def finish(self, ok: bool, headline: str | None = None) -> float:
        """Write the notebook's closing line; return its wall time in seconds.

        ``ok``: ``done in 42 s: <headline>``; else ``FAILED after 42 s in cell 3 ('x = ...')``
        (cell numbered as in the failure line: all cells, from 1).
        """
        wall = time.monotonic() - self.t0
        self.__exit__(None, None, None)
        if ok:
            self._line(f"done in {fmt_duration(wall)}" + (f": {headline}" if headline else ""))
        else:
            where = f" in cell {self.cell_index + 1} ({self.cell_line!r})" if self.cell_index is not None else ""
            self._line(f"FAILED after {fmt_duration(wall)}{where}")
        return wall

    # --- rendering
    def _elapsed(self) -> str:
        return fmt_duration(time.monotonic() - self.t0)

    def _running(self) -> str:
        if self.cell_index is None:
            return self.cell_line
        return f"cell {self.cell_index + 1}: {self.cell_line}"

    def _line(self, text: str) -> None:
        print(f"[{self.name}] {text}", file=self.stream, flush=True)

    def _beat(self) -> None:
        every = 1.0 if self.tty else self.heartbeat_s
        while not self._stop.wait(every):
            with self._lock:
                loop = loop_status(self.status_file, self.cell_wall0) if self.running else None
                if self._bar is not None:
                    self._bar.set_postfix_str(self._running() + (f" | {loop}" if loop else ""), refresh=False)
                    self._bar.refresh()  # the elapsed clock moves during a long cell
                elif self.running:
                    in_cell = fmt_duration(time.monotonic() - self.cell_t0)
                    self._line(f"{self.done}/{self.total} done, {self._elapsed()}  still running "
                               f"{self._running()} ({in_cell} so far)" + (f"; {loop}" if loop else ""))
                else:
                    idle = ("starting the kernel" if self.cell_index is None else
                            "stopping the kernel" if self.done >= self.total else "between cells")
                    self._line(f"{self.done}/{self.total} done, {self._elapsed()}  {idle}")
