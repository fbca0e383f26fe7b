"""Progress of a corpus preparation: MB/s, texts/s and an ETA, as ``run-notebooks`` shows its own.

On a terminal (``stream.isatty()``) a tqdm bar in MB of input redraws in place; anywhere else (logs,
``| tee``, a notebook's captured output) a plain line every ``every_s`` seconds (default 10) and one
at the end, never a carriage return. The ETA is from the input bytes still to read at the mean rate
so far (compressed bytes for compressed files).
"""
from __future__ import annotations

import time
from typing import TextIO

from nbkit.units import fmt_duration


class CorpusProgress:
    """Fed with :meth:`update` (input bytes done, texts done); ``stage`` names what runs.

    Args:
        total_bytes: input bytes of the whole corpus (the ETA's denominator).
        stream: where to write (default ``sys.stdout``); ``enabled=False`` writes nothing.
        tty: bar (True) or plain lines (False); default ``stream.isatty()``.
        every_s: seconds between plain lines.
    """

    def __init__(self, total_bytes: int, stream: TextIO | None = None, tty: bool | None = None,
                 every_s: float = 10.0, enabled: bool = True):
        import sys

        self.total = max(1, total_bytes)
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_s = every_s
        self.t0 = self.t_last = time.monotonic()
        self.start_bytes = 0
        self.bytes = self.texts = 0
        self._bar = None

    def begin(self, stage: str, start_bytes: int = 0) -> None:
        """Start (or restart) the clock for ``stage``; ``start_bytes`` already done before (resume)."""
        self.stage, self.start_bytes = stage, start_bytes
        self.bytes, self.texts = start_bytes, 0
        self.t0 = self.t_last = time.monotonic()
        if not self.enabled:
            return
        if self.tty:
            from tqdm.std import tqdm

            self.close()
            self._bar = tqdm(total=self.total / 1e6, initial=start_bytes / 1e6, desc=stage, unit="MB",
                             file=self.stream, leave=False, dynamic_ncols=True, mininterval=0.5,
                             bar_format="{desc} |{bar:20}| {n:.1f}/{total:.1f} MB {elapsed}<{remaining}{postfix}")
        else:
            self._line(f"{stage}: {self.total / 1e6:,.1f} MB of input in all" +
                       (f", {start_bytes / 1e6:,.1f} MB already done" if start_bytes else ""))

    def rates(self) -> tuple[float, float, float | None]:
        """``(MB/s, texts/s, ETA seconds or None)`` since :meth:`begin`."""
        dt = max(1e-9, time.monotonic() - self.t0)
        mbps = (self.bytes - self.start_bytes) / 1e6 / dt
        eta = (self.total - self.bytes) / 1e6 / mbps if mbps > 0 else None
        return mbps, self.texts / dt, eta

    def summary(self) -> str:
        mbps, tps, eta = self.rates()
        pct = 100 * self.bytes / self.total
        left = f", ETA {fmt_duration(eta)}" if eta is not None else ""
        return f"{pct:.1f}% ({self.bytes / 1e6:,.1f} MB), {mbps:.2f} MB/s, {tps:,.0f} texts/s{left}"

    def update(self, bytes_done: int, texts: int) -> None:
        """Input position in bytes (absolute) and texts kept since the last call."""
        self.texts += texts
        delta, self.bytes = bytes_done - self.bytes, max(self.bytes, bytes_done)
        if not self.enabled:
            return
        if self._bar is not None:
            mbps, tps, _ = self.rates()
            self._bar.set_postfix_str(f"{mbps:.2f} MB/s, {tps:,.0f} texts/s", refresh=False)
            self._bar.update(max(0, delta) / 1e6)
        elif time.monotonic() - self.t_last >= self.every_s:
            self.t_last = time.monotonic()
            self._line(f"{self.stage}: {self.summary()}")

    def finish(self, what: str) -> None:
        """The closing line: ``what`` plus the mean rates and the wall time."""
        self.close()
        if self.enabled:
            mbps, tps, _ = self.rates()
            wall = fmt_duration(time.monotonic() - self.t0)
            self._line(f"{self.stage} done in {wall}: {what} ({mbps:.2f} MB/s, {tps:,.0f} texts/s)")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _line(self, text: str) -> None:
        print(f"[prepare-corpus] {text}", file=self.stream, flush=True)
