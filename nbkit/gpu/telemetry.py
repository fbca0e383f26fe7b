"""GPU telemetry beside training: sampler ticks on the loop's ``elapsed_s`` axis, and input-bound advice.

:class:`TelemetryCallback` is a duck-typed nbkit Callback (the loop does not import this module).
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from nbkit.gpu.nvml import Nvml, Sample, take_sample
from nbkit.gpu.sampler import Sampler


def sample_row(s: Sample, t0: float) -> dict[str, float | None]:
    """One :class:`~nbkit.gpu.nvml.Sample` as a row at ``elapsed_s`` (s since ``t0``): ``util_pct`` mean over
    physical GPUs (%, ``utilization.gpu``), ``mem_used_mib``/``mem_total_mib`` summed (MiB, ``memory.used``/
    ``memory.total``), host ``cpu_pct`` (%) and ``ram_used_mib`` (MiB); ``None`` = not available.
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
    """One sentence (numbers, ``num_workers``, ``pin_memory``, a larger batch) when the run looks input-bound.

    Input-bound: after the first ``warmup_fraction`` of ``samples`` (Samples or :func:`sample_row` rows), the
    median GPU utilisation is below ``util_below`` (%) while more than ``free_above`` (0-1) of device memory
    is free: the GPU waits for the host (PyTorch tuning guide: "enable async data loading"). None otherwise,
    and with fewer than ``min_samples`` usable samples.
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
    """Record GPU/host samples while the loop trains; at the end :attr:`advice` (:func:`input_bound_advice`).

    ``source``: a ``GpuMonitor`` (anything with ``.sampler``), a ``Sampler`` of Samples, or None to sample NVML every
    ``interval`` s (a sampler started here is stopped at the end); ``verbose``: print the advice. ``rows`` (one
    :func:`sample_row` per tick), ``logs`` (the loop's log dicts) and ``evals`` (``(elapsed_s, metrics)``) share one
    clock.
    """

    def __init__(self, source: Any = None, interval: float = 1.0, verbose: bool = True, nvml: Nvml | None = None):
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
        self.logs.append({**logs, "elapsed_s": time.monotonic() - self._t0})

    def on_evaluate(self, loop: Any, metrics: dict[str, Any]) -> None:
        """Keep the evaluation metrics with their time."""
        self.evals.append((time.monotonic() - self._t0, dict(metrics)))

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
        """A matplotlib ``Figure``: loss and tokens/s above, GPU util % and memory % below, on one elapsed_s axis
        (CPU % when there are no GPU samples).
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
            bottom.plot([r["elapsed_s"] for r in g], [100 * (r["mem_used_mib"] or 0) / r["mem_total_mib"] for r in g],
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
