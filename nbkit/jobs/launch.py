"""Run a training script under ``torchrun`` from a notebook, stream its output back, stop it cleanly; and
``python -m nbkit.jobs.launch [torchrun arguments]``: torchrun whose Ctrl-C exits 130 in one line.

``launch`` starts torchrun in its own session, never by forking the kernel (a fork after CUDA is initialised
breaks the children's CUDA context); ``LaunchHandle.wait()`` hands every ``NBKIT_METRICS {json}`` line to
``on_metrics``. Stopping, signals and exit codes: docs/distributed.md.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from nbkit import jsonio
from nbkit.errors import ConfigError

_RUNNING: set = set()  # strong refs: a job whose handle was dropped is still stopped at exit


def visible_gpus() -> int:
    """CUDA devices this process can see (``torch.cuda.device_count()``; creates no CUDA context)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def build_command(target, nproc_per_node: int = 1, args=(), torchrun_args=()) -> list[str]:
    """The ``torchrun`` command line for ``target``: a ``.py`` file; ``"pkg.module"`` (run as ``-m``);
    ``"pkg.module:function"`` or an importable function (called with ``args`` as strings by ``nbkit.jobs.call``).
    ``torchrun_args`` replace the default ``--standalone`` (single node, free port), e.g. for several nodes.

    Raises:
        ConfigError: ``nproc_per_node < 1``; a function defined in the notebook itself (``__main__``), which the
            worker processes cannot import.
    """
    if int(nproc_per_node) < 1:
        raise ConfigError(f"nproc_per_node={nproc_per_node}; use 1 or more processes")
    if callable(target):
        mod, name = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
        if mod in (None, "__main__") or "<" in name:
            raise ConfigError(f"{target!r} is defined in the notebook, which torchrun workers cannot "
                              "import; move it into a .py file and pass 'module:function' or the path")
        target = f"{mod}:{name}"
    target = str(target)
    if target.endswith(".py") or Path(target).is_file():
        entry = [target]
    elif ":" in target:
        entry = ["-m", "nbkit.jobs.call", target]
    else:
        entry = ["-m", target]
    head = list(torchrun_args) or ["--standalone"]
    return [sys.executable, "-m", "nbkit.jobs.launch", *head,
            f"--nproc-per-node={int(nproc_per_node)}", *entry, *map(str, args)]


def _metrics_sink(on_metrics):
    """Adapter: ``update(dict)`` (a LivePlot), else ``on_log(None, dict)`` (a Callback), else a callable."""
    if on_metrics is None:
        return None
    for attr in ("update", "on_log"):
        fn = getattr(on_metrics, attr, None)
        if callable(fn) and not isinstance(on_metrics, dict):
            return fn if attr == "update" else (lambda m: fn(None, m))
    if callable(on_metrics):
        return on_metrics
    raise ConfigError(f"on_metrics={on_metrics!r} has no update()/on_log() and is not callable")


def _in_kernel() -> bool:
    """True inside a Jupyter kernel (an IPython shell with a ``kernel``), without importing IPython."""
    ip = sys.modules.get("IPython")
    shell = ip.get_ipython() if ip is not None and hasattr(ip, "get_ipython") else None
    return shell is not None and hasattr(shell, "kernel")


class LaunchHandle:
    """A running torchrun job. Use ``wait()``, ``poll()``, ``terminate()``; read ``metrics``,
    ``lines`` (last ``keep_lines``), ``returncode``, ``pids`` (every process seen), ``log_path``."""

    def __init__(self, cmd: list[str], env: dict, on_metrics=None, log_path: Path | None = None,
                 show: bool = True, throttle_s: float = 0.5, keep_lines: int = 200):
        self.cmd, self.log_path, self.throttle_s = cmd, log_path, throttle_s
        self.metrics: list[dict] = []
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._sink = _metrics_sink(on_metrics)
        self._show = bool(show)
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._display, self._last_draw, self._reader_done = None, 0.0, False
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                     text=True, bufsize=1, errors="replace", start_new_session=True)
        self.pids: set[int] = {self.proc.pid}
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._track, daemon=True).start()
        _RUNNING.add(self)

    # --- background threads: read the pipe, remember every descendant ------------------------
    def _read(self) -> None:
        for line in self.proc.stdout:
            if self._log:
                self._log.write(line)
                self._log.flush()
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _descendants(self) -> set[int]:
        import psutil

        try:
            return {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        except psutil.Error:
            return set()

    def _track(self) -> None:
        while self.proc.poll() is None:
            self.pids |= self._descendants()
            time.sleep(0.2)

    # --- main-thread side ----------------------------------------------------------------------
    def poll(self) -> int | None:
        """Handle the lines received so far (display, metrics); the exit code, or ``None`` while running."""
        got_lines = False
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is None:
                self._reader_done = True
                continue
            m = parse_metrics_line(line)
            if m is not None:
                self.metrics.append(m)
                if self._sink:
                    self._sink(m)
                    continue  # plotted; without a sink it is shown like any other line
            self.lines.append(line)
            got_lines = True
            if self._show and not _in_kernel():
                print(line, flush=True)
        if got_lines and self._show and _in_kernel():
            self._draw(force=False)
        return self.proc.poll() if self._reader_done else None

    def _draw(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < self.throttle_s:
            return
        from IPython.display import Pretty, display

        text = Pretty("\n".join(list(self.lines)[-20:]))
        if self._display is None:
            self._display = display(text, display_id=True)
        else:
            self._display.update(text)
        self._last_draw = now

    def wait(self, timeout: float | None = None, check: bool = True) -> int | None:
        """Stream output until the job ends; return its exit code (``None`` after ``timeout`` s).

        Kernel interrupt (KeyboardInterrupt): :meth:`interrupt` (the workers checkpoint), then re-raises.

        Raises:
            RuntimeError: ``check`` and a non-zero exit code; the message holds the last lines.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while (rc := self.poll()) is None:
                if deadline is not None and time.monotonic() > deadline:
                    return None
                time.sleep(0.05)
        except KeyboardInterrupt:
            self.interrupt()
            raise
        finally:
            if self._show and _in_kernel() and self.lines:
                self._draw(force=True)
        _RUNNING.discard(self)
        if self._log:
            self._log.close()
        if check and rc != 0:
            tail = "\n".join(list(self.lines)[-15:])
            full = f" (every rank's output: {self.log_path})" if self.log_path else " (pass log_dir= to keep it all)"
            raise RuntimeError(f"torchrun exited with code {rc}{full}; last output:\n{tail}")
        return rc

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def alive_pids(self) -> set[int]:
        """Recorded processes still running (zombies count as gone)."""
        import psutil

        alive = set()
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
        return alive

    def interrupt(self, grace_s: float = 60.0) -> int | None:
        """Ctrl-C for the job: SIGINT to torchrun, which forwards it to the workers (they save a checkpoint at the
        step boundary and exit, within torchrun's ``--shutdown-timeout``, 30 s by default); after ``grace_s`` s
        :meth:`terminate` (at once after a second interrupt). Returns the exit code (130 when it stopped on the
        signal)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        try:
            while self.proc.poll() is None and time.monotonic() < deadline:
                self.poll()   # show the workers' last lines (where they stopped, how to resume)
                time.sleep(0.1)
        finally:              # also after a second interrupt: nothing of the job is left running
            rc = self.terminate()
        return rc

    def terminate(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM the job (torchrun's group and every worker seen), SIGKILL after ``grace_s`` s.

        Returns torchrun's exit code; workers torchrun does not stop in time are killed by PID.
        """
        self.pids |= self._descendants()
        targets = self.alive_pids()
        if targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            self._signal(targets, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while self.alive_pids() and time.monotonic() < deadline:
                self.proc.poll()  # reap torchrun itself
                time.sleep(0.05)
            self._signal(self.alive_pids(), signal.SIGKILL)
        rc = self.proc.wait()
        _RUNNING.discard(self)
        return rc

    @staticmethod
    def _signal(pids: set[int], sig) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


@atexit.register
def _terminate_all() -> None:
    for h in list(_RUNNING):
        if h.returncode is None:
            h.terminate(grace_s=3.0)


def launch(target, nproc_per_node: int = 1, args=(), env: dict | None = None, on_metrics=None,
           log_dir: str | Path | None = None, device: str = "auto", torchrun_args=(),
           show: bool = True) -> LaunchHandle:
    """Start ``target`` (as :func:`build_command` takes it, with ``args``) under torchrun with ``nproc_per_node``
    processes on this machine; return a ``LaunchHandle``.

    ``env``: extra variables (the kernel's environment is inherited). ``on_metrics`` receives each metrics dict
    in ``wait()``/``poll()``: an object with ``update(dict)`` (LivePlot), a Callback (``on_log(None, dict)``) or
    a callable. ``log_dir``: all output also appended to ``<log_dir>/launch-<time>.log``. ``device``: ``"cuda"``,
    ``"cpu"`` (``CUDA_VISIBLE_DEVICES=""`` for the workers, so they use gloo) or ``"auto"`` (cuda when a GPU is
    visible). ``show``: echo output (a display updated in place in a kernel, print elsewhere).

    Raises:
        ConfigError: more processes than visible GPUs on a CUDA run (names both numbers and the CPU
            alternative); ``torch.distributed.run`` missing; bad ``target``/``device``.
    """
    if device not in ("auto", "cuda", "cpu"):
        raise ConfigError(f"device={device!r}; use 'auto', 'cuda' or 'cpu'")
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("torch.distributed.run") is None:
        raise ConfigError("torch.distributed.run (torchrun) is not importable in this environment; "
                          "install PyTorch >= 2.0 with distributed support (pip install torch)")
    n_gpus = visible_gpus()
    if device == "auto":
        device = "cuda" if n_gpus else "cpu"
    if device == "cuda" and nproc_per_node > n_gpus:
        raise ConfigError(
            f"nproc_per_node={nproc_per_node} but only {n_gpus} GPU(s) are visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!s}); use "
            f"nproc_per_node<={n_gpus}, or run on CPU with gloo: launch(..., device='cpu'), "
            "which sets CUDA_VISIBLE_DEVICES='' for the workers")
    cmd = build_command(target, nproc_per_node, args, torchrun_args)
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    # workers import nbkit even when it is not installed (a notebook's cwd is notebooks/)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding nbkit/
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, child_env.get("PYTHONPATH")) if p)
    if device == "cpu":
        child_env["CUDA_VISIBLE_DEVICES"] = ""
    log_path = None
    if log_dir is not None:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        log_path = Path(log_dir) / time.strftime("launch-%Y%m%d-%H%M%S.log")
    return LaunchHandle(cmd, child_env, on_metrics=on_metrics, log_path=log_path, show=show)


METRICS_PREFIX = "NBKIT_METRICS "


def emit_metrics(metrics: dict, file=None) -> None:
    """Print one metrics line ``NBKIT_METRICS {json}`` (strict JSON by :func:`nbkit.jsonio.dumps`: NaN/inf as
    ``null``) and flush; call it on rank 0 only."""
    print(METRICS_PREFIX + jsonio.dumps(metrics), file=file or sys.stdout, flush=True)


class MetricsPrinter:
    """Loop callback for job scripts: each log dict, and each evaluation's with the loop's ``step`` added, as a
    metrics line that ``launch`` plots."""

    def on_log(self, loop, logs: dict) -> None:
        emit_metrics(logs)

    def on_evaluate(self, loop, metrics: dict) -> None:
        step = getattr(getattr(loop, "state", None), "step", None)
        emit_metrics({"step": step, **metrics} if step is not None else metrics)


def parse_metrics_line(line: str) -> dict | None:
    """The dict in a metrics line (its prefix anywhere: torchrun may prepend ``[rank0]:``), or None for any other
    line and for malformed JSON."""
    i = line.find(METRICS_PREFIX)
    if i < 0:
        return None
    try:
        value = json.loads(line[i + len(METRICS_PREFIX):])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


_SHUTDOWN_NOISE = ("death signal, shutting down workers", "closing signal")   # the agent's lines on a signal


def main(argv: list[str] | None = None) -> int:
    """``python -m nbkit.jobs.launch [torchrun arguments]``: torchrun (``torch.distributed.run``), except that a
    signal stopping it (Ctrl-C) exits ``128 + signal`` (130) after the workers' own lines, without torch's
    ``SignalException`` traceback and the agent's shutdown warnings. Other outcomes are torchrun's."""
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    class Quiet(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not any(n in record.getMessage() for n in _SHUTDOWN_NOISE)

    for name in ("torch.distributed.elastic.agent.server.api", "torch.distributed.elastic.multiprocessing.api"):
        logging.getLogger(name).addFilter(Quiet())
    try:
        torchrun(argv)
    except SignalException as exc:
        return 128 + int(exc.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
