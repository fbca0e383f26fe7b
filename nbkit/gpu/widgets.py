"""``GpuMonitor``: a live ipywidgets view of every GPU (CPU and RAM without one), updated in place.

Updates set widget traits from the sampler thread (ipykernel forwards them), never print or clear; the
``text/plain`` repr is stable (``GpuMonitor(devices=2, interval=1s)``) unless sampling errors occurred.
"""
from __future__ import annotations

import html
import time
import weakref
from typing import Any

import ipywidgets as w

from nbkit.gpu.nvml import DeviceSnapshot, Nvml, Sample, take_sample
from nbkit.gpu.sampler import Sampler

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], lo: float = 0.0, hi: float = 100.0) -> str:
    """Unicode block sparkline of ``values`` scaled to [lo, hi]; ``None`` -> space."""
    span, top = max(hi - lo, 1e-9), len(BLOCKS) - 1
    levels = [None if v is None else int((min(max(v, lo), hi) - lo) / span * top + 0.5) for v in values]   # 0..top
    return "".join(" " if k is None else BLOCKS[k] for k in levels)


def _bar(description: str, maximum: float = 100.0) -> w.FloatProgress:
    return w.FloatProgress(value=0.0, min=0.0, max=maximum, description=description, layout=w.Layout(width="340px"))


class _DeviceRow:
    """Widgets of one GPU: title, utilisation and memory bars, details, sparkline, processes."""

    def __init__(self) -> None:
        self.title = w.HTML()
        self.util = _bar("util %")
        self.mem = _bar("mem MiB")
        self.details = w.HTML()
        self.spark = w.HTML()
        self.procs = w.HTML()
        self.box = w.VBox([self.title, w.HBox([self.util, self.mem]), self.details, self.spark, self.procs])

    def update(self, d: DeviceSnapshot, util_hist: list[float | None]) -> None:
        kind = " (MIG instance)" if d.mig else (" (MIG enabled)" if d.mig_mode else "")
        self.title.value = f"<b>{html.escape(d.label)}: {html.escape(d.name)}{kind}</b>"
        self.util.value = d.util_gpu_pct or 0.0
        self.util.description = "util %" if d.util_gpu_pct is not None else "util n/a"
        if d.mem_total_mib:
            self.mem.max = d.mem_total_mib
        self.mem.value = min(d.mem_used_mib or 0.0, self.mem.max)
        self.details.value = html.escape(
            f"util {d.fmt('util_gpu_pct')} · mem {d.fmt('mem_used_mib')} / {d.fmt('mem_total_mib')} · "
            f"{d.fmt('temperature_c')} · {d.fmt('power_w')} / {d.fmt('power_limit_w')} · "
            f"SM {d.fmt('sm_clock_mhz')} · mem clk {d.fmt('mem_clock_mhz')} · "
            f"PCIe tx {d.fmt('pcie_tx_mib_s')} rx {d.fmt('pcie_rx_mib_s')}")
        self.spark.value = f"<code>util {html.escape(sparkline(util_hist))}</code>"
        if d.processes is None:
            reason = d.unavailable.get("processes", "n/a")
            self.procs.value = f"processes: n/a ({html.escape(reason)})"
        elif not d.processes:
            self.procs.value = "processes: none"
        else:
            self.procs.value = "processes: " + ", ".join(
                html.escape(f"{p.pid} {p.name} {'n/a' if p.used_mib is None else f'{p.used_mib:.0f}'} MiB")
                for p in d.processes)


class GpuMonitor(w.VBox):
    """Live per-GPU bars and sparklines; without a GPU, CPU and RAM with the reason and fix. No CUDA context.

    ``interval``: seconds between samples; ``history``: samples kept (the sparkline draws the last 60); ``nvml``: an
    :class:`~nbkit.gpu.nvml.Nvml` (a test double; default the real NVML, initialised now). ``sampler`` holds the
    :class:`~nbkit.gpu.nvml.Sample` history; ``state`` the NVML state found.

    Raises:
        nbkit.errors.ConfigError: interval <= 0 or history < 1 (before any widget is built).
    """

    SPARK_POINTS = 60
    _live: "weakref.WeakSet[GpuMonitor]" = weakref.WeakSet()

    def __init__(self, interval: float = 1.0, history: int = 600, nvml: Nvml | None = None,
                 autostart: bool = True, **kwargs: Any):
        Sampler.check_args(interval, history)  # before the widget exists: a half-built one warns at exit
        super().__init__(**kwargs)
        self.nvml = nvml if nvml is not None else Nvml()
        self.state = self.nvml.init()
        self.sampler: Sampler[Sample] = Sampler(lambda: take_sample(self.nvml), interval, history)
        self.sampler.listeners.append(self.update)
        self.header = w.HTML()
        self.reason = w.HTML()
        self.cpu = _bar("CPU %")
        self.ram = _bar("RAM MiB")
        self.cpu_spark = w.HTML()
        self._rows: list[_DeviceRow] = []
        self._layout_for(self.nvml.device_count() if self.state.ok else 0)
        self.header.value = "<b>nbkit GPU monitor</b> · waiting for the first sample"
        if autostart:
            self.start()

    def _layout_for(self, n_devices: int) -> None:
        if n_devices:
            self._rows = [_DeviceRow() for _ in range(n_devices)]
            self.children = [self.header] + [r.box for r in self._rows] + [self.cpu, self.ram]
        else:
            self.reason.value = (f"<b>No GPU</b>: {html.escape(self.state.detail)}<br>"
                                 f"<b>Fix</b>: {html.escape(self.state.fix)}")
            self._rows = []
            self.children = [self.header, self.reason, w.HBox([self.cpu, self.ram]), self.cpu_spark]

    # ---- control
    def start(self) -> "GpuMonitor":
        """Start sampling, stopping this kernel's other monitors (a re-run cell must not pile up threads)."""
        for other in list(GpuMonitor._live):
            if other is not self:
                other.stop()
        GpuMonitor._live.add(self)
        self.sampler.start()
        return self

    def stop(self) -> None:
        """Stop sampling; the widget keeps its last reading."""
        self.sampler.stop()

    def close(self) -> None:
        """Stop sampling and close every part of the widget; safe on one whose construction failed part-way."""
        sampler = getattr(self, "sampler", None)
        if sampler is not None:
            sampler.close()
        parts = [p for p in (getattr(self, n, None) for n in ("header", "reason", "cpu", "ram", "cpu_spark"))
                 if p is not None]
        for r in getattr(self, "_rows", []):
            parts += [r.title, r.util, r.mem, r.details, r.spark, r.procs, r.box]
            parts += list(r.box.children)
        for part in parts:
            part.close()
        super().close()

    def telemetry(self, verbose: bool = True):
        """A :class:`~nbkit.gpu.telemetry.TelemetryCallback` on these samples (``Loop(callbacks=[m.telemetry()])``)."""
        from nbkit.gpu.telemetry import TelemetryCallback

        return TelemetryCallback(self, verbose=verbose)

    @property
    def samples(self) -> list[Sample]:
        """A copy of the sample history, oldest first."""
        return self.sampler.snapshot()

    # ---- rendering (runs on the sampler thread)
    def update(self, sample: Sample) -> None:
        """Render one sample in place (called for every tick; callable directly in tests)."""
        hist = self.sampler.snapshot()[-self.SPARK_POINTS:]
        err = self.sampler.error_text()
        self.header.value = (f"<b>nbkit GPU monitor</b> · sample {self.sampler.count} · "
                             f"{time.strftime('%H:%M:%S', time.localtime(sample.wall_time))} · "
                             f"every {self.sampler.interval:g} s"
                             + (f" · <span style='color:#cf222e'>{html.escape(err)}</span>" if err else ""))
        if len(sample.devices) != len(self._rows) and sample.devices:
            self._layout_for(len(sample.devices))
        for i, (row, d) in enumerate(zip(self._rows, sample.devices)):
            row.update(d, [s.devices[i].util_gpu_pct if i < len(s.devices) else None for s in hist])
        if sample.host is not None:
            self.cpu.value = sample.host.cpu_pct
            self.ram.max = sample.host.ram_total_mib
            self.ram.value = min(sample.host.ram_used_mib, self.ram.max)
            cpu_hist = [s.host.cpu_pct if s.host else None for s in hist]
            self.cpu_spark.value = (f"<code>CPU {html.escape(sparkline(cpu_hist))}</code> "
                                    f"{sample.host.cpu_pct:.0f} % · RAM {sample.host.ram_used_mib:.0f} / "
                                    f"{sample.host.ram_total_mib:.0f} MiB")

    # ---- stable text
    def __repr__(self) -> str:
        what = f"devices={len(self._rows)}" if self._rows else f"no GPU: {self.state.name}"
        err = self.sampler.error_text()
        return f"GpuMonitor({what}, interval={self.sampler.interval:g}s" + (f"; {err}" if err else "") + ")"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))
