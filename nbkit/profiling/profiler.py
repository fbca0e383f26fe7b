"""``torch.profiler`` around N training steps: top-operator tables, a trace, peak memory, a CUPTI check.

Schedule: ``wait`` steps untouched, ``warmup`` traced and discarded, ``active`` recorded. Results: top
operators by self device and self CPU time (ms over the active steps), ``trace.json.gz`` (Perfetto,
chrome://tracing), peak memory (MiB; CUDA ``max_memory_allocated``, CPU ``ru_maxrss``) and on CUDA a
memory snapshot for https://pytorch.org/memory_viz.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# Operator names (aten, without "aten::" and the in-place "_" suffix) whose cost is moving bytes, not FLOPs:
# elementwise, normalisation, softmax, dropout, copies, embedding gathers, the optimizer's per-parameter math
# (``_foreach_*`` too). Their share of time feeds the memory-bound rule in nbkit.profiling.diagnosis.
MEMORY_BOUND_OPS = (
    "add", "mul", "div", "sub", "gelu", "gelu_backward", "tanh", "relu", "silu", "dropout", "native_dropout",
    "native_dropout_backward", "layer_norm", "native_layer_norm", "native_layer_norm_backward", "softmax", "_softmax",
    "_softmax_backward_data", "log_softmax", "_log_softmax", "_log_softmax_backward_data", "copy", "to", "_to_copy",
    "fill", "zero", "masked_fill", "where", "embedding", "embedding_dense_backward", "cat", "clone", "contiguous",
    "pow", "sqrt", "rsqrt", "addcmul", "addcdiv", "lerp", "nll_loss", "nll_loss_forward", "nll_loss_backward",
    "nll_loss2d_forward", "sum", "mean")
MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention", "_flash_attention_forward")

CUPTI_FIX = ("the CUDA profiler recorded no kernel events: CUPTI is not allowed to read GPU counters in this container "
             "(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES). Fix: start the container with `--cap-add SYS_ADMIN` (docker run / "
             "compose `cap_add: [SYS_ADMIN]`), or on the host set the driver option "
             "`NVreg_RestrictProfilingToAdminUsers=0` (/etc/modprobe.d/nvidia-profiling.conf, then reload the driver "
             "or reboot). CPU-side operator times below are still valid.")


@dataclass
class OpRow:
    """One operator aggregated over the active steps; times in milliseconds."""

    name: str
    calls: int
    self_cpu_ms: float
    self_device_ms: float
    cpu_total_ms: float
    device_total_ms: float


@dataclass
class KernelCheck:
    """Whether device (kernel) timings exist; ``message`` says why not and the fix."""

    ok: bool
    message: str


@dataclass
class ProfileResult:
    """What :func:`profile_steps` measured (see the module docstring)."""

    device: str
    active_steps: int
    top_device: list[OpRow]
    top_cpu: list[OpRow]
    kernel_check: KernelCheck
    stats: dict
    trace_path: Path | None
    peak_memory_mib: float | None
    memory_snapshot_path: Path | None = None
    notes: list[str] = field(default_factory=list)


def _self_device_us(evt) -> float:
    value = getattr(evt, "self_device_time_total", None)
    return float(value if value is not None else getattr(evt, "self_cuda_time_total", 0) or 0)


def _is_device_event(evt) -> bool:
    return "CPU" not in str(getattr(evt, "device_type", "CPU")).upper()


def summarize(averages, top: int = 10, sort_by: str = "self_device") -> list[OpRow]:
    """Top ``top`` :class:`OpRow` s of ``prof.key_averages()`` (µs -> ms) by ``sort_by`` (``self_device`` or
    ``self_cpu``), rows with zero time there dropped. Raises ``ConfigError`` for another ``sort_by``.
    """
    key = {"self_device": "self_device_ms", "self_cpu": "self_cpu_ms"}.get(sort_by)
    if key is None:
        from nbkit.errors import ConfigError

        raise ConfigError(f"sort_by {sort_by!r}: use 'self_device' or 'self_cpu'")
    rows = [OpRow(name=e.key, calls=int(e.count), self_cpu_ms=float(e.self_cpu_time_total) / 1e3,
                  self_device_ms=_self_device_us(e) / 1e3, cpu_total_ms=float(e.cpu_time_total) / 1e3,
                  device_total_ms=float(getattr(e, "device_time_total", 0) or 0) / 1e3) for e in averages]
    rows = [r for r in rows if getattr(r, key) > 0]
    rows.sort(key=lambda r: getattr(r, key), reverse=True)
    return rows[:top]


def format_table(rows: list[OpRow], title: str = "", name_width: int = 48) -> str:
    """Fixed-width text table of ``rows`` with each op's share of the sorted column."""
    lines = [title] if title else []
    lines.append(f"{'operator':<{name_width}} {'calls':>6} {'self CPU ms':>12} {'self dev ms':>12}")
    for r in rows:
        name = r.name if len(r.name) <= name_width else r.name[: name_width - 1] + "…"
        lines.append(f"{name:<{name_width}} {r.calls:>6} {r.self_cpu_ms:>12.3f} {r.self_device_ms:>12.3f}")
    if not rows:
        lines.append("(no operators with time in this column)")
    return "\n".join(lines)


def check_kernel_events(averages, device_type: str, log_text: str = "") -> KernelCheck:
    """On CUDA, a profile with no kernel time (CUPTI restricted in the container) gives the fix
    (:data:`CUPTI_FIX`, quoting ``log_text``'s ``CUPTI_ERROR_INSUFFICIENT_PRIVILEGES``); CPU is always ok.
    """
    if device_type != "cuda":
        return KernelCheck(True, "CPU run: operator times are CPU times (no GPU kernels).")
    device_us = sum(_self_device_us(e) for e in averages)
    kernels = sum(int(e.count) for e in averages if _is_device_event(e))
    if device_us > 0 and kernels > 0:
        return KernelCheck(True, f"{kernels} kernel launches recorded.")
    detail = " (the profiler log says CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)" if "INSUFFICIENT_PRIVILEGES" in log_text \
        else ""
    return KernelCheck(False, CUPTI_FIX + detail)


def op_stats(averages, active_steps: int, device_type: str) -> dict:
    """What the diagnosis reads, per active step: ``kernels_per_step``, ``mean_kernel_us`` (CUDA; None on CPU),
    ``memory_bound_share`` and ``matmul_share`` (shares of aten self time in :data:`MEMORY_BOUND_OPS` /
    :data:`MATMUL_OPS`).
    """
    averages = list(averages)
    steps = max(active_steps, 1)
    out = {"kernels_per_step": None, "mean_kernel_us": None}
    if device_type == "cuda":
        kern = [e for e in averages if _is_device_event(e)]
        count = sum(int(e.count) for e in kern)
        if count:
            out["kernels_per_step"] = count / steps
            out["mean_kernel_us"] = sum(_self_device_us(e) for e in kern) / count
    time_of = _self_device_us if device_type == "cuda" else (lambda e: float(e.self_cpu_time_total))
    aten = [(e.key[len("aten::"):], time_of(e)) for e in averages
            if e.key.startswith("aten::") and not _is_device_event(e)]
    total = sum(t for _, t in aten)

    def memory_bound(name: str) -> bool:
        base = name[:-1] if name.endswith("_") and not name.startswith("_foreach") else name
        return base in MEMORY_BOUND_OPS or name.startswith("_foreach_")

    out["memory_bound_share"] = sum(t for n, t in aten if memory_bound(n)) / total if total else None
    out["matmul_share"] = sum(t for n, t in aten if n in MATMUL_OPS) / total if total else None
    return out


def profile_steps(step_fn, out_dir, wait: int = 1, warmup: int = 1, active: int = 3,
                  device=None, top: int = 10, memory_snapshot: bool = True) -> ProfileResult:
    """Profile ``wait + warmup + active`` calls of ``step_fn()`` into ``out_dir`` (``trace.json.gz``; on CUDA
    ``memory_snapshot.pickle``); ``device`` picks the activities. The profiler's own fd-2 lines are captured
    (error lines printed). Raises ``ConfigError`` when ``active`` < 1.
    """
    import resource

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from nbkit.errors import ConfigError
    from nbkit.profiling.microbench import resolve_device

    if active < 1:
        raise ConfigError("profile_steps needs active >= 1 recorded steps")
    device = resolve_device(device)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trace_path = out_dir / "trace.json.gz"
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    snap_path = None
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        if memory_snapshot:
            torch.cuda.memory._record_memory_history(max_entries=100_000)
    # Kineto's own lines (``USDT:... profiler_start``) go to fd 2, which Jupyter shows: only errors come back
    with quiet_fd(2) as log, profile(activities=activities,
                                     schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                                     on_trace_ready=lambda p: p.export_chrome_trace(str(trace_path))) as prof:
        for _ in range(wait + warmup + active):
            step_fn()
            if cuda:
                torch.cuda.synchronize(device)
            prof.step()
    notes = []
    if cuda:
        peak = torch.cuda.max_memory_allocated(device) / 2 ** 20
        if memory_snapshot:
            snap_path = out_dir / "memory_snapshot.pickle"
            torch.cuda.memory._dump_snapshot(str(snap_path))
            torch.cuda.memory._record_memory_history(enabled=None)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB (Linux)
        notes.append("CPU peak memory is the process's peak resident set since it started.")
    averages = prof.key_averages()
    return ProfileResult(
        device=device.type, active_steps=active, top_device=summarize(averages, top, "self_device"),
        top_cpu=summarize(averages, top, "self_cpu"), kernel_check=check_kernel_events(averages, device.type, log.text),
        stats=op_stats(averages, active, device.type), trace_path=trace_path if trace_path.exists() else None,
        peak_memory_mib=peak, memory_snapshot_path=snap_path, notes=notes)


def make_step_fn(loop, windows: int = 4):
    """A zero-argument step for :func:`profile_steps`: ``loop.train_step`` on ``windows`` windows of
    ``grad_accum_steps`` batches drawn once and cycled (no collation in the timed steps, no per-phase sync);
    returns ``train_step``'s dict. Puts the model in train mode. Raises ``ConfigError`` when ``windows`` < 1.
    """
    import itertools

    from nbkit.errors import ConfigError

    if windows < 1:
        raise ConfigError(f"windows={windows}: make_step_fn needs at least one window of batches")
    stream = loop.batch_stream()
    cycle = itertools.cycle([[next(stream) for _ in range(loop.config.grad_accum_steps)] for _ in range(windows)])
    loop.model.train()

    def step() -> dict:
        return loop.train_step(next(cycle))

    return step


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
    """Capture what is written to file descriptor ``fd`` in the block; re-emit only error lines (all lines if the
    block raised). Yields a :class:`Captured` whose ``text`` is filled on exit.
    """
    captured = Captured()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):   # a closed or detached stream: nothing to flush
            stream.flush()
    saved = os.dup(fd)
    ok = False
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield captured
            ok = True
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")
            keep = captured.errors if ok else [ln for ln in captured.text.splitlines()
                                               if ln.strip() and not NOISE.match(ln)]
            if keep:
                print("\n".join(keep), file=sys.stderr, flush=True)
