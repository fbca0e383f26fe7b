"""Keep native libraries' chatter off the notebook: capture a file descriptor, re-emit only errors.

torch.profiler's C++ side (Kineto) writes lines such as
``USDT:2026-11-30 15:24:58 16244:16244 SyncActivityProfilerHandler.cpp:52] profiler_start``
straight to file descriptor 2. ``sys.stderr`` never sees them, so
``contextlib.redirect_stderr`` cannot help, and ipykernel forwards fd 2 into the cell's
output. :func:`quiet_fd` points the descriptor at a temporary file for the duration of a
block (``os.dup2``, the mechanism ``wurlitzer`` uses; a file rather than a pipe, so a
chatty library can never fill a pipe buffer and block), then writes back only the lines
that look like errors, through ``sys.stderr`` (so in Jupyter they still reach the cell).
If the block raises, every captured line except known noise is written back: it may
explain the exception.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

# Informational lines of the profiler (Kineto): USDT probes, older releases' "STAGE:" lines.
NOISE = re.compile(r"^(USDT:|STAGE:)")
# What counts as an error worth showing (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES included).
ERROR = re.compile(r"error|traceback|fatal|exception|abort", re.IGNORECASE)


@dataclass
class Captured:
    """What the descriptor received inside the block (``text``, filled in on exit)."""

    text: str = ""

    @property
    def errors(self) -> list[str]:
        """The captured lines that look like errors (and are not known noise)."""
        return [ln for ln in self.text.splitlines() if ERROR.search(ln) and not NOISE.match(ln)]


@contextlib.contextmanager
def quiet_fd(fd: int = 2) -> Iterator[Captured]:
    """Capture everything written to ``fd`` inside the block; re-emit only error lines.

    Yields a :class:`Captured` whose ``text`` holds the raw output after the block
    (e.g. for :func:`nbkit.profiling.profiler.check_kernel_events`). Python-level
    ``sys.stderr`` writes are flushed first so their order is kept.
    """
    captured = Captured()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = os.dup(fd)
    ok = False
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield captured
            ok = True
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")
            keep = captured.errors if ok else [ln for ln in captured.text.splitlines()
                                               if ln.strip() and not NOISE.match(ln)]
            if keep:
                print("\n".join(keep), file=sys.stderr, flush=True)
