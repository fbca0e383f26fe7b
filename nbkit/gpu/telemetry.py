"""GPU telemetry beside training: samples on the loop's time axis, and input-bound advice.

:class:`TelemetryCallback` follows the nbkit Callback protocol by duck typing
(``on_train_begin/on_log/on_evaluate/on_train_end(loop, ...)``; see
docs/architecture.md), so the loop needs no import of this module. It records
every sampler tick while the loop runs as a row on the same ``elapsed_s`` axis
as the loop's log rows (loss, tokens/s), and at the end asks
:func:`input_bound_advice` whether the GPU was starved.

The heuristic: a GPU that is busy computing shows high ``utilization.gpu``;
when the median stays low *and* much memory is free, the GPU waits for the
host (data loading, collation, Python overhead) rather than running out of
work it could hold, so more loader workers, pinned memory or a larger batch
help. (Same reading as PyTorch's performance tuning guide: "enable async data
loading", and nvitop/gpustat users' rule of thumb.)
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from nbkit.gpu.nvml import Nvml, Sample, take_sample
from nbkit.gpu.sampler import Sampler


def sample_row(s: Sample, t0: float) -> dict[str, float | None]:
    """Flatten one :class:`~nbkit.gpu.nvml.Sample` to a row on the ``elapsed_s`` axis.

    ``util_pct``: mean utilisation over physical GPUs that report it (%);
    ``mem_used_mib``/``mem_total_mib``: summed over physical GPUs (MiB);
    ``cpu_pct``, ``ram_used_mib`` from the host. ``None`` = not available.
    """
    phys = [d for d in s.devices if not d.mig]
    utils = [d.util_gpu_pct for d in phys if d.util_gpu_pct is not None]
    used = [d.mem_used_mib for d in phys if d.mem_used_mib is not None]
    total = [d.mem_total_mib for d in phys if d.mem_total_mib is not None]
    return {
        "elapsed_s": s.time_s - t0,
        "util_pct": sum(utils) / len(utils) if utils else None,
        "mem_used_mib": sum(used) if used else None,
        "mem_total_mib": sum(total) if total else None,
        "cpu_pct": s.host.cpu_pct if s.host else None,
        "ram_used_mib": s.host.ram_used_mib if s.host else None,
    }


def input_bound_advice(samples: list[Any], util_below: float = 60.0, free_above: float = 0.3,
                       min_samples: int = 5, warmup_fraction: float = 0.2) -> str | None:
    """Say so when a run looks input-bound; otherwise ``None``.

    Args:
        samples: :class:`~nbkit.gpu.nvml.Sample` objects or rows from :func:`sample_row`.
        util_below: median GPU utilisation (%) under which the GPU counts as starved.
        free_above: fraction of device memory that must be free (0-1) to suggest a
            larger batch; with less free memory low utilisation has other causes.
        min_samples: fewer usable samples (after warm-up) -> ``None`` (no verdict).
        warmup_fraction: leading share of samples ignored (model load, first compile).

    Returns:
        One sentence with the numbers and the suggestions ``num_workers``,
        ``pin_memory`` and a larger batch, or ``None`` (no GPU data, too few
        samples, or the GPU looks busy).
    """
    rows = [sample_row(s, 0.0) if isinstance(s, Sample) else s for s in samples]
    rows = rows[int(len(rows) * warmup_fraction):]
    rows = [r for r in rows if r.get("util_pct") is not None and r.get("mem_total_mib")]
    if len(rows) < min_samples:
        return None
    util = statistics.median(r["util_pct"] for r in rows)
    free = statistics.median(1 - (r["mem_used_mib"] or 0.0) / r["mem_total_mib"] for r in rows)
    if util >= util_below or free <= free_above:
        return None
    span = rows[-1]["elapsed_s"] - rows[0]["elapsed_s"]
    return (f"GPU utilisation median {util:.0f} % with {free * 100:.0f} % of memory free over "
            f"{span:.0f} s ({len(rows)} samples): the run looks input-bound (the GPU waits for "
            "data). Try DataLoader num_workers=2-8 and pin_memory=True (TrainConfig(num_workers=..., "
            "pin_memory=True)), or a larger batch size; memory allows it.")


class TelemetryCallback:
    """Record GPU/host samples while the nbkit loop trains (duck-typed Callback).

    Args:
        source: a :class:`nbkit.gpu.widgets.GpuMonitor` (anything with ``.sampler``),
            a :class:`nbkit.gpu.sampler.Sampler` of Samples, or ``None`` to sample
            on its own (real NVML, ``interval`` seconds).
        interval: seconds between samples when ``source`` is None (default 1 s).
        verbose: print the input-bound advice at the end of training.

    Attributes:
        rows: one :func:`sample_row` dict per sampler tick during training.
        logs: the loop's log dicts (``elapsed_s``, ``loss``, ``tokens_per_s``, ...).
        evals: ``(elapsed_s, metrics)`` pairs.
        advice: :func:`input_bound_advice` of ``rows`` after training (or None).

    The sampler is started at ``on_train_begin`` if it was not running, and then
    stopped again at ``on_train_end``; a running monitor keeps running.
    """

    def __init__(self, source: Any = None, interval: float = 1.0, verbose: bool = True,
                 nvml: Nvml | None = None):
        if source is None:
            nv = nvml if nvml is not None else Nvml()
            source = Sampler(lambda: take_sample(nv), interval)
        self.sampler: Sampler = getattr(source, "sampler", source)
        self.verbose = verbose
        self.rows: list[dict[str, float | None]] = []
        self.logs: list[dict[str, Any]] = []
        self.evals: list[tuple[float, dict[str, Any]]] = []
        self.advice: str | None = None
        self._t0 = 0.0
        self._started = False

    def _on_sample(self, s: Sample) -> None:
        self.rows.append(sample_row(s, self._t0))

    def _elapsed(self) -> float:
        return time.monotonic() - self._t0

    # ---- Callback protocol (all methods optional in nbkit.train.callbacks.Callback)
    def on_train_begin(self, loop: Any) -> None:
        """Reset, set the time origin, subscribe to the sampler and start it if needed."""
        self.rows, self.logs, self.evals, self.advice = [], [], [], None
        self._t0 = time.monotonic()
        self.sampler.listeners.append(self._on_sample)
        self._started = not self.sampler.running
        if self._started:
            self.sampler.start()

    def on_log(self, loop: Any, logs: dict[str, Any]) -> None:
        """Keep the log row, timed on this callback's clock (the sampler rows' origin)."""
        row = dict(logs)
        row["elapsed_s"] = self._elapsed()
        self.logs.append(row)

    def on_evaluate(self, loop: Any, metrics: dict[str, Any]) -> None:
        """Keep the evaluation metrics with their time."""
        self.evals.append((self._elapsed(), dict(metrics)))

    def on_train_end(self, loop: Any, result: Any = None) -> None:
        """Unsubscribe, stop the sampler if this callback started it, compute :attr:`advice`."""
        if self._on_sample in self.sampler.listeners:
            self.sampler.listeners.remove(self._on_sample)
        if self._started:
            self.sampler.stop()
            self._started = False
        self.advice = input_bound_advice(self.rows)
        if self.verbose and self.advice:
            print(self.advice)

    def plot(self):
        """Loss and tokens/s (top) and GPU util % and memory % (bottom) on one elapsed_s axis.

        Returns the matplotlib ``Figure``; GPU panels say "no GPU samples" when empty.
        """
        import matplotlib.pyplot as plt

        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
        t = [r["elapsed_s"] for r in self.logs if r.get("loss") is not None]
        top.plot(t, [r["loss"] for r in self.logs if r.get("loss") is not None], label="loss")
        top.set_ylabel("loss")
        tps = [(r["elapsed_s"], r["tokens_per_s"]) for r in self.logs if r.get("tokens_per_s")]
        if tps:
            ax2 = top.twinx()
            ax2.plot(*zip(*tps), color="tab:green", label="tokens/s")
            ax2.set_ylabel("tokens/s")
        g = [r for r in self.rows if r["util_pct"] is not None]
        if g:
            bottom.plot([r["elapsed_s"] for r in g], [r["util_pct"] for r in g], label="GPU util %")
            bottom.plot([r["elapsed_s"] for r in g],
                        [100 * (r["mem_used_mib"] or 0) / r["mem_total_mib"] for r in g],
                        label="GPU memory %")
            bottom.legend(loc="upper right")
        else:
            c = [r for r in self.rows if r["cpu_pct"] is not None]
            bottom.plot([r["elapsed_s"] for r in c], [r["cpu_pct"] for r in c], label="CPU %")
            bottom.set_title("no GPU samples: CPU %", fontsize=9)
        bottom.set_ylim(0, 105)
        bottom.set_xlabel("elapsed (s)")
        bottom.set_ylabel("%")
        fig.tight_layout()
        return fig
