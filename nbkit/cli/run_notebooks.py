"""Run the guided notebooks headless, in order, keeping the executed copies.

``nbkit run-notebooks`` (and ``scripts/run_notebooks.sh``) is the main job
without a browser: it executes ``notebooks/NN_*.ipynb`` with nbclient in
their own directory, one kernel per notebook, and writes each executed copy
to ``<runs>/<scale>/executed/`` (with ``NN_name.kernel.log``, the kernel
process's own output). Bad inputs (scale, ``--only``, runs
directory) are :class:`nbkit.errors.ConfigError` before any kernel starts; a
failing, timed-out or killed cell stops the run with one line naming the
notebook, the cell and the fix, and the executed copy up to that cell is saved.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nbkit.runs import notebooks_dir


def select(paths: list[Path], only: list[str] | None) -> list[Path]:
    """Keep the notebooks whose file name starts with one of ``only`` (all when None), sorted."""
    paths = sorted(paths)
    if not only:
        return paths
    chosen = [p for p in paths if any(p.name.startswith(o) for o in only)]
    if not chosen:
        names = ", ".join(p.name for p in paths)
        raise ValueError(f"no notebook matches {only}; available: {names}")
    return chosen


KERNEL_ENV_DEFAULTS = {
    # Nothing is downloaded from a model or dataset hub (as in scripts/run_notebooks.sh).
    "HF_HUB_OFFLINE": "1",
    # DataLoader workers fork after the Rust tokenizer used threads (nbkit doctor warns).
    "TOKENIZERS_PARALLELISM": "false",
    "MPLBACKEND": "module://matplotlib_inline.backend_inline",
}


@dataclass(frozen=True)
class Plan:
    """What :func:`run_all` will do: the preset name, the notebooks, where copies go, the kernel env."""

    scale: str
    notebooks: list[Path]
    src: Path          # folder the kernels run in
    out_dir: Path      # <runs>/<scale>/executed
    env: dict[str, str]


def plan(scale: str | None = None, only: list[str] | None = None,
         environ: dict[str, str] | None = None) -> Plan:
    """Check the inputs of a run and return its :class:`Plan`; runs nothing.

    The kernels get ``environ`` (default ``os.environ``) plus ``NBKIT_SCALE``, an
    absolute ``NBKIT_RUNS_DIR`` and :data:`KERNEL_ENV_DEFAULTS` where unset.

    Raises:
        nbkit.errors.ConfigError: unknown scale, no notebook matching ``only``, no
            notebooks folder, or a runs directory that cannot be created or written.
            The message names the fix.
    """
    from nbkit.errors import ConfigError
    from nbkit.recipes.scale import SCALES, get_scale

    env = dict(os.environ if environ is None else environ)
    try:
        preset = get_scale(scale or env.get("NBKIT_SCALE") or None)
    except ValueError as exc:
        source = "--scale" if scale else "NBKIT_SCALE"
        raise ConfigError(f"unknown scale {(scale or env.get('NBKIT_SCALE'))!r} ({source}); "
                          f"use one of {', '.join(SCALES)}") from exc
    try:
        src = notebooks_dir()
        todo = select(list(src.glob("[0-9][0-9]_*.ipynb")), only)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc
    if not todo:
        raise ConfigError(f"no NN_*.ipynb notebooks in {src}; set NBKIT_NOTEBOOKS_DIR to the notebooks/ folder")
    # Kernels run inside notebooks/: pin the runs dir to the caller's choice first.
    runs = Path(env.get("NBKIT_RUNS_DIR") or "runs").expanduser().resolve()
    out_dir = runs / preset.name / "executed"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".nbkit-write-test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        where = "NBKIT_RUNS_DIR" if env.get("NBKIT_RUNS_DIR") else "the default ./runs"
        raise ConfigError(
            f"cannot write executed notebooks to {out_dir} ({where}): {exc.strerror or exc}; "
            "set NBKIT_RUNS_DIR to a writable folder"
        ) from exc
    env.update(NBKIT_SCALE=preset.name, NBKIT_RUNS_DIR=str(runs))
    for name, value in KERNEL_ENV_DEFAULTS.items():
        env.setdefault(name, value)
    return Plan(preset.name, todo, src, out_dir, env)


class Terminated(KeyboardInterrupt):
    """A signal stopped the run: SIGTERM (``timeout``, a batch scheduler, ``kill``), or SIGINT while a kernel ran."""


_SIGTERM = {"seen": False}  # set by the handler: the kernel may die of the same signal first


def _raise_terminated(signum, frame):
    _SIGTERM["seen"] = True
    raise Terminated()


def _cleanup_after_dead_kernel(exc: BaseException) -> bool:
    """nbclient 0.10-0.11 raises ``AttributeError: 'NoneType' object has no attribute 'cleanup_resources'``
    from its own cleanup when the kernel was killed from outside (seen under ``timeout`` on a GPU machine)."""
    return isinstance(exc, AttributeError) and "cleanup_resources" in str(exc)


def failure_line(name: str, exc: BaseException, cell_index: int | None, cell: dict | None,
                 timeout: int) -> str:
    """One line: which notebook and cell failed, how, and the fix.

    ``cell_index`` counts all cells from 0 (as nbclient does); the line shows it
    1-based, as "cell 3", with the cell's first source line.
    """
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    from nbkit.cli.notebook_progress import first_line

    where = f"{name} cell {cell_index + 1} ({first_line((cell or {}).get('source', ''))!r})" if cell_index is not None else name
    if isinstance(exc, CellTimeoutError):
        return (f"{where} did not finish within {timeout} s. Fix: raise --timeout (seconds per cell) "
                "or run a smaller NBKIT_SCALE.")
    if isinstance(exc, Terminated):
        return (f"{where}: stopped by a signal (SIGTERM from a time limit such as `timeout`, a scheduler or "
                "`kill`; or Ctrl-C); "
                "the executed copy up to this cell is saved. Fix: give the run more time, or run a smaller "
                "NBKIT_SCALE or fewer notebooks (--only).")
    if isinstance(exc, (DeadKernelError, AssertionError)) or _cleanup_after_dead_kernel(exc):
        # AssertionError / AttributeError: nbclient's own cleanup after a dead kernel (km already gone)
        return (f"{where}: the kernel died (out of memory? killed?). Fix: run a smaller NBKIT_SCALE "
                "or free memory; `dmesg | grep -i oom` shows out-of-memory kills.")
    if isinstance(exc, CellExecutionError):
        what = f"{exc.ename}: {exc.evalue}".strip().splitlines()
        return f"{where} raised {what[0][:300] if what else 'an error'}. Fix: see the traceback in the executed copy."
    if isinstance(exc, NoSuchKernel):
        return (f"{name}: no Jupyter kernel named {exc.name!r}. Fix: "
                f"`{sys.executable} -m ipykernel install --sys-prefix --name {exc.name}`.")
    if isinstance(exc, KeyboardInterrupt):
        return f"{where}: interrupted."
    return f"{where} failed: {type(exc).__name__}: {exc}".splitlines()[0]


def machine_summary() -> str:
    """This machine in words: ``"Linux x86_64, 2 CPUs, no GPU"`` or ``"..., 1 × NVIDIA H200"`` (NVML, no CUDA context)."""
    import platform

    from nbkit.gpu.nvml import Nvml

    nv = Nvml(pcie=False)
    names = [d.name for d in nv.sample() if not d.mig]
    nv.shutdown()
    gpus = f"{len(names)} × {names[0]}" if names and len(set(names)) == 1 else (", ".join(names) or "no GPU")
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {gpus}"


def record_timings(out_dir: Path, seconds: dict[str, float]) -> Path:
    """Write ``out_dir/timings.json``: ``{"seconds": {"01": 27.0, ...}, "machine": ..., "written_at": ...}``.

    ``scripts/expect_table.py`` reads it for the README's time row and machine name.
    """
    from nbkit import jsonio

    path = Path(out_dir) / "timings.json"
    old = jsonio.loads_strict(path.read_text(encoding="utf-8")).get("seconds", {}) if path.is_file() else {}
    jsonio.write_json(path, {"seconds": {**old, **seconds}, "machine": machine_summary(),
                             "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return path


def run_all(scale: str | None = None, only: list[str] | None = None, timeout: int = 3600,
            kernel_name: str = "python3", heartbeat_s: float = 10.0) -> int:
    """Execute the notebooks in order; return 0 when all ran, 1 at the first failure (130: Ctrl-C, 143: SIGTERM).

    Whatever stops a notebook (a cell error, a cell over ``timeout``, a dead
    kernel, a missing kernel) ends the run with one line on stderr naming the
    notebook, the cell and the fix; the executed copy up to that cell is saved.

    Args:
        scale: ``smoke``, ``cpu`` or ``gpu``; exported as ``NBKIT_SCALE`` for the
            kernels (default: the environment's, see :func:`nbkit.recipes.scale.get_scale`).
        only: file-name prefixes (``["01", "02"]``) to run a subset.
        timeout: seconds allowed per cell.
        heartbeat_s: seconds between "still running" lines when stdout is not a terminal.

    Progress (:mod:`nbkit.cli.notebook_progress`) goes to stdout: a bar per notebook on a
    terminal, plain lines otherwise (a line per cell start, a heartbeat every
    ``heartbeat_s``); each notebook ends with a line giving its wall time and
    headline metric, and the run with a table of them (:mod:`nbkit.cli.summary`).

    Raises:
        nbkit.errors.ConfigError: bad inputs, before anything runs (see :func:`plan`).
    """
    import signal
    import threading

    p = plan(scale, only)

    _SIGTERM["seen"] = False
    if threading.current_thread() is threading.main_thread():  # SIGTERM -> report, save the copy, exit 143
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    else:
        previous = None
    try:
        return _run(p, timeout, kernel_name, heartbeat_s)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(p: Plan, timeout: int, kernel_name: str, heartbeat_s: float) -> int:
    import nbformat
    from nbclient import NotebookClient

    from nbkit.cli.notebook_progress import NotebookProgress, code_cells
    from nbkit.cli.summary import Row, headline, table

    print(f"scale={p.scale}  runs={p.env['NBKIT_RUNS_DIR']}  notebooks={len(p.notebooks)}", flush=True)
    rows = [Row(path.stem, "not run") for path in p.notebooks]
    seconds: dict[str, float] = {}  # "01" -> wall seconds, for executed/timings.json
    for row, path in zip(rows, p.notebooks):
        nb = nbformat.read(path, as_version=4)
        current: dict = {}  # the cell being executed, for the failure line
        # the kernel's loops write their step/loss/ETA here (nbkit.train.callbacks.ProgressFile); the heartbeat reads it
        status_file = p.out_dir / f"{path.stem}.progress.json"
        status_file.unlink(missing_ok=True)
        progress = NotebookProgress(path.stem, code_cells(nb), heartbeat_s=heartbeat_s, status_file=status_file)

        def track(cell, cell_index, current=current, progress=progress):
            current.update(cell=cell, index=cell_index)
            progress.cell_started(cell, cell_index)

        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": str(p.src)}}, on_cell_execute=track,
                                on_cell_executed=progress.cell_finished)
        started = time.time()
        # The kernel process's own output (not the cells': those are in the notebook)
        # goes to a log beside the copy, so a killed kernel's traceback stays off the console.
        kernel_log = p.out_dir / f"{path.stem}.kernel.log"
        try:
            with progress, open(kernel_log, "w") as log:
                client.execute(env={**p.env, "NBKIT_PROGRESS_FILE": str(status_file)}, stdout=log, stderr=log)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001  (each is reported, none re-raised)
            # While a kernel runs, nbclient's own SIGINT/SIGTERM handler shuts the kernel down (then
            # DeadKernelError or an AttributeError from its cleanup); it leaves this future behind.
            signalled = getattr(client, "_async_cleanup_kernel_future", None) is not None
            if (_SIGTERM["seen"] or signalled) and not isinstance(exc, Terminated):
                exc = Terminated()
            nbformat.write(nb, p.out_dir / path.name)
            row.status, row.wall_s = "FAILED", progress.finish(ok=False)
            print(table(rows), flush=True)
            print(failure_line(path.name, exc, current.get("index"), current.get("cell"), timeout),
                  file=sys.stderr)
            print(f"executed copy (up to the failing cell): {p.out_dir / path.name}; "
                  f"kernel log: {kernel_log}", file=sys.stderr)
            return 143 if isinstance(exc, Terminated) else 130 if isinstance(exc, KeyboardInterrupt) else 1
        nbformat.write(nb, p.out_dir / path.name)
        row.headline = headline(path.name, p.out_dir.parent, since=started)
        row.status, row.wall_s = "ok", progress.finish(ok=True, headline=row.headline)
        seconds[path.name[:2]] = round(row.wall_s, 1)
        record_timings(p.out_dir, seconds)
    print(table(rows))
    print(f"executed copies: {p.out_dir}")
    return 0
