"""``nbkit run-notebooks``: the guided notebooks headless, in order, one kernel each, with live progress.

Executed copies go to ``<runs>/<scale>/executed/`` beside ``NN_name.kernel.log``. A failing, timed-out or
killed cell stops the run with one line naming the notebook, the cell and the fix. Progress: a tqdm bar
on a terminal, plain lines and a heartbeat in logs, and while a cell trains the loop's own progress lines
(step, loss, ETA: ``nbkit.train.callbacks.ProgressLine``) as they appear in the cell's output.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from nbkit.runs import notebooks_dir
from nbkit.units import fmt_duration


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
    """Check a run's inputs and return its :class:`Plan` (runs nothing). The kernels get ``environ`` plus
    ``NBKIT_SCALE``, an absolute ``NBKIT_RUNS_DIR`` and :data:`KERNEL_ENV_DEFAULTS` where unset.

    Raises:
        nbkit.errors.ConfigError: unknown scale, no notebook matching ``only``, no notebooks folder, or a
            runs directory that cannot be written.
    """
    from nbkit.errors import ConfigError
    from nbkit.settings import SCALES, scale_name

    env = dict(os.environ if environ is None else environ)
    name = scale_name(scale or env.get("NBKIT_SCALE") or "")
    if not name:
        from nbkit.recipes.config import resolve_scale

        name = resolve_scale(None)
    if name not in SCALES:
        source = "--scale" if scale else "NBKIT_SCALE"
        raise ConfigError(f"unknown scale {(scale or env.get('NBKIT_SCALE'))!r} ({source}); "
                          f"use one of {', '.join(SCALES)}")
    try:
        src = notebooks_dir()
        todo = select(list(src.glob("[0-9][0-9]_*.ipynb")), only)
    except (ValueError, FileNotFoundError) as exc:
        raise ConfigError(str(exc)) from exc
    if not todo:
        raise ConfigError(f"no NN_*.ipynb notebooks in {src}; set NBKIT_NOTEBOOKS_DIR to the notebooks/ folder")
    # Kernels run inside notebooks/: pin the runs dir to the caller's choice first.
    runs = Path(env.get("NBKIT_RUNS_DIR") or "runs").expanduser().resolve()
    out_dir = runs / name / "executed"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".nbkit-write-test-", dir=out_dir))
    except OSError as exc:
        where = "NBKIT_RUNS_DIR" if env.get("NBKIT_RUNS_DIR") else "the default ./runs"
        raise ConfigError(
            f"cannot write executed notebooks to {out_dir} ({where}): {exc.strerror or exc}; "
            "set NBKIT_RUNS_DIR to a writable folder"
        ) from exc
    env.update(NBKIT_SCALE=name, NBKIT_RUNS_DIR=str(runs))
    for key, value in KERNEL_ENV_DEFAULTS.items():
        env.setdefault(key, value)
    return Plan(name, todo, src, out_dir, env)


# ---- progress of one notebook
SKIP_TAG = "skip-execution"  # nbclient's default skip_cells_with_tag


def first_line(source: str, width: int = 60) -> str:
    """The first non-blank line of a cell's source, cut to ``width`` characters with ``...``."""
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


#: how a training loop's progress line begins (``nbkit.train.callbacks.ProgressLine.PREFIX``; a test ties them)
LOOP_PREFIX = "train step "


def loop_lines(text: str) -> list[str]:
    """The training loop's progress lines in a chunk of a cell's stdout (:data:`LOOP_PREFIX`)."""
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith(LOOP_PREFIX)]


def code_cells(nb) -> int:
    """How many cells nbclient will execute: code cells with source, not tagged ``skip-execution``."""
    return sum(1 for c in nb.cells if c.cell_type == "code" and c.source.strip()
               and SKIP_TAG not in c.get("metadata", {}).get("tags", []))


class NotebookProgress:
    """Live progress of one notebook, fed by nbclient's ``on_cell_execute`` / ``on_cell_executed`` hooks.

    ``tty`` (default ``stream.isatty()``): a bar redrawn every second; else plain lines, a heartbeat every
    ``heartbeat_s`` s; the training loop's progress lines in a cell's output are shown too. A context manager;
    :meth:`finish` writes the closing line.
    """

    def __init__(self, name: str, total: int, stream: TextIO | None = None, tty: bool | None = None,
                 heartbeat_s: float = 10.0):
        self.name, self.total = name, total
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.heartbeat_s = heartbeat_s
        self.loop_line: str | None = None    # the running cell's latest training progress line
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
            self.cell_t0, self.loop_line = time.monotonic(), None
            if self._bar is not None:
                self._bar.set_postfix_str(self._running(), refresh=True)
            else:
                self._line(f"{self.done}/{self.total} done, {self._elapsed()}  running {self._running()}")

    def cell_output(self, text: str) -> None:
        """Stdout text of the running cell arrived: show the training loop's progress lines in it."""
        lines = loop_lines(text)
        if not lines:
            return
        with self._lock:
            self.loop_line = lines[-1]
            if self._bar is not None:
                self._bar.set_postfix_str(f"{self._running()} | {self.loop_line}", refresh=True)
            else:
                for line in lines:
                    self._line(line)

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
        """Write ``done in 42 s: <headline>`` or ``FAILED after 42 s in cell 3 ('x = ...')``; return its seconds."""
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
        return self.cell_line if self.cell_index is None else f"cell {self.cell_index + 1}: {self.cell_line}"

    def _line(self, text: str) -> None:
        print(f"[{self.name}] {text}", file=self.stream, flush=True)

    def _beat(self) -> None:
        every = 1.0 if self.tty else self.heartbeat_s
        while not self._stop.wait(every):
            with self._lock:
                loop = self.loop_line if self.running else None
                if self._bar is not None:
                    self._bar.set_postfix_str(self._running() + (f" | {loop}" if loop else ""), refresh=False)
                    self._bar.refresh()  # the elapsed clock moves during a long cell
                elif self.running:
                    in_cell = fmt_duration(time.monotonic() - self.cell_t0)
                    self._line(f"{self.done}/{self.total} done, {self._elapsed()}  still running "
                               f"{self._running()} ({in_cell} so far)")
                else:
                    idle = ("starting the kernel" if self.cell_index is None else
                            "stopping the kernel" if self.done >= self.total else "between cells")
                    self._line(f"{self.done}/{self.total} done, {self._elapsed()}  {idle}")


# ---- headline metrics and the final table
def _num(value) -> float | None:
    """A finite float, or None (missing, null, NaN, a string such as "None")."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _tokenizer(d: dict) -> str:
    unk = _num(d.get("unk_rate"))
    vocab = d.get("vocab_size")
    head = f"[UNK] rate {unk:.3%} on held-out text" if unk is not None else "[UNK] rate not recorded"
    return head + (f" (vocabulary {vocab:,})" if isinstance(vocab, int) else "")


def _mlm(d: dict) -> str:
    ppl = _num(d.get("eval_perplexity"))
    head = f"held-out perplexity {ppl:,.1f}" if ppl is not None else "held-out perplexity not recorded"
    return head + (f" after {d['steps']:,} steps" if isinstance(d.get("steps"), int) else "")


def _versus(d: dict, key: str, what: str, baseline: str) -> str:
    """``test <what> x vs <baseline> y (+z points)`` from ``test_<key>`` and ``baseline_<key>``."""
    score, base = _num(d.get(f"test_{key}")), _num(d.get(f"baseline_{key}"))
    if score is None:
        return f"test {what} not recorded"
    head = f"test {what} {score:.3f}"
    return head if base is None else f"{head} vs {baseline} {base:.3f} ({(score - base) * 100:+.1f} points)"


def _profiling(d: dict) -> str:
    step = d.get("step") or {}
    mfu, tps = _num(step.get("mfu")), _num(step.get("tokens_per_s"))
    where = d.get("device") or "this device"
    head = f"MFU {mfu:.1%}" if mfu is not None else f"MFU n/a (no known peak FLOP/s for {where})"
    return head if tps is None else f"{head}, {tps:,.0f} tokens/s"


def _causal(d: dict) -> str:
    """Notebook 06's ``baselines.json`` (``nbkit.evaluate.ngram.compare_with_baselines``): the GPT's held-out
    perplexity beside each n-gram's."""
    rows = [r for r in d.get("rows") or [] if isinstance(r, dict)]
    ppl = [(r.get("model"), _num(r.get("eval_perplexity"))) for r in rows]
    if not ppl or ppl[0][1] is None:
        return "held-out perplexity not recorded"
    others = ", ".join(f"{name} {p:,.1f}" for name, p in ppl[1:] if p is not None)
    return f"held-out perplexity {ppl[0][1]:,.1f}" + (f" vs {others}" if others else "")


def _sft(d: dict) -> str:
    """Notebook 08's ``scores.json``: the held-out loss on the answers before and after SFT, and the tuned model's
    sentiment accuracy beside the best baseline's on the same questions (when the demo set was scored)."""
    before, after = _num(d.get("eval_loss_before")), _num(d.get("eval_loss_after"))
    head = (f"answer loss {before:.3f} -> {after:.3f}" if None not in (before, after)
            else "held-out answer loss not recorded")
    rows = [r for r in d.get("rows") or [] if isinstance(r, dict) and r.get("task") == "sentiment"]
    tuned = next((_num(r.get("value")) for r in rows if r.get("model") == "after SFT"), None)
    base = [(r.get("model"), _num(r.get("value"))) for r in rows if r.get("model") not in ("before SFT", "after SFT")]
    base = [(name, v) for name, v in base if v is not None]
    if tuned is None or not base:
        return head
    name, best = max(base, key=lambda b: b[1])
    return f"{head}; sentiment accuracy {tuned:.3f} vs {name} {best:.3f}"


#: notebook-name prefix -> (file under ``<runs>/<scale>/``, function of its parsed JSON -> headline)
SOURCES = {"01": ("tokenizer/stats.json", _tokenizer), "02": ("mlm/metrics.json", _mlm),
           "03": ("sentiment/metrics.json", lambda d: _versus(d, "accuracy", "accuracy", "TF-IDF baseline")),
           "04": ("profiling/results.json", _profiling), "06": ("causal/baselines.json", _causal),
           "07": ("ner/metrics.json", lambda d: _versus(d, "entity_f1", "entity F1", "CRF baseline")),
           "08": ("sft/scores.json", _sft)}


def headline(notebook: str, scale_dir: Path, since: float | None = None) -> str | None:
    """The headline metric of ``notebook`` (``02_...ipynb``) from the JSON it wrote under ``scale_dir``
    (:data:`SOURCES`); None for a notebook without one. Never raises: a missing, unreadable or stale file
    (written before ``since``, Unix s) becomes a phrase saying so.
    """
    if notebook[:2] not in SOURCES:
        return None
    name, reader = SOURCES[notebook[:2]]
    path = Path(scale_dir) / name
    if not path.is_file():
        return f"no {name} written"
    if since is not None and path.stat().st_mtime < since - 1:  # 1 s: coarse file-system clocks
        return f"{name} not rewritten by this run (stale)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{name} unreadable ({type(exc).__name__})"
    return reader(data) if isinstance(data, dict) else f"{name} is not a JSON object"


@dataclass
class Row:
    """One notebook in the final table: ``status`` is ``ok``, ``FAILED`` or ``not run``; ``wall_s`` in seconds."""

    notebook: str
    status: str
    wall_s: float | None = None
    headline: str | None = None


def table(rows: list[Row]) -> str:
    """The final table as aligned plain text (it goes to logs), ending with the total wall time."""
    head = ("notebook", "status", "wall time", "headline")
    body = [(r.notebook, r.status, fmt_duration(r.wall_s) if r.wall_s is not None else "-", r.headline or "")
            for r in rows]
    total = sum(r.wall_s for r in rows if r.wall_s is not None)
    body.append(("total", "", fmt_duration(total), ""))
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(3)]

    def fmt(line):
        return (f"{line[0]:<{widths[0]}}  {line[1]:<{widths[1]}}  {line[2]:>{widths[2]}}  {line[3]}").rstrip()

    rule = "-" * max(len(fmt(line)) for line in [head, *body])
    return "\n".join([fmt(head), rule, *(fmt(b) for b in body[:-1]), rule, fmt(body[-1])])


# ---- running
class Terminated(KeyboardInterrupt):
    """A signal stopped the run: SIGTERM (``timeout``, a batch scheduler, ``kill``), or SIGINT while a kernel ran."""


_STOP: dict = {"signal": None}  # the first SIGTERM/SIGINT that arrived while run_all ran (its number)


def _note_signal(signum, frame) -> None:
    """The SIGTERM/SIGINT handler: only records the signal. It never raises: a handler's exception lands in
    whatever the main thread runs then (an import, nbclient's asyncio loop, a file write) and left nbclient in
    an invalid state (its traceback, no saved copy). :func:`_execute` acts on it at a safe point instead."""
    if _STOP["signal"] is None:
        _STOP["signal"] = signum


def _signal_kernel(client, sig) -> bool:
    """Send ``sig`` to the client's kernel and its children (jupyter_client starts it as a session leader and interrupts
    that group, as the interrupt button does). False when the kernel has not started or has ended."""
    proc = getattr(getattr(getattr(client, "km", None), "provisioner", None), "process", None)
    if proc is None or proc.poll() is not None:
        return False
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        with contextlib.suppress(OSError):
            proc.send_signal(sig)
    return True


#: seconds nbclient gets, after the kernel is killed, to notice and clean up before the run reports anyway
STOP_GRACE_S = 60.0
#: seconds an interrupted kernel gets to end its cell before it is killed: a training cell finishes its step and
#: saves a checkpoint in that time; within the 30 s Kubernetes (and SLURM's KillWait) give before SIGKILL
INTERRUPT_WAIT_S = 20.0


def _execute(client, env: dict, log) -> tuple[BaseException | None, str | None]:
    """Run ``client.execute`` in a worker thread (the main thread keeps its signal handlers) and wait; returns what it
    raised (None: it finished) and how a signal ended the kernel: None (no signal), ``"interrupted"`` (it ended its
    cell on SIGINT, so a training cell saved a checkpoint) or ``"killed"`` (SIGKILL after :data:`INTERRUPT_WAIT_S` s,
    or no cell was running). After :data:`STOP_GRACE_S` more s the run reports without the thread."""
    import signal

    box: dict = {}

    def work():
        try:
            client.execute(env=env, stdout=log, stderr=log)
        except BaseException as exc:   # noqa: BLE001  (handed to the main thread, which reports it)
            box["exc"] = exc

    worker = threading.Thread(target=work, name="nbclient", daemon=True)
    worker.start()
    since, how = None, None
    while worker.is_alive():
        worker.join(0.2)
        if _STOP["signal"] is not None and worker.is_alive():
            since = since or time.monotonic()
            if how is None:
                how = "interrupted" if _signal_kernel(client, signal.SIGINT) else "killed"
            if (how == "killed" or time.monotonic() - since >= INTERRUPT_WAIT_S) \
                    and _signal_kernel(client, signal.SIGKILL):
                how = "killed"
            if time.monotonic() - since > INTERRUPT_WAIT_S + STOP_GRACE_S:
                break
    # nbclient registers its cleanup with atexit and unregisters it only when the kernel started: one killed
    # during start-up would fail that cleanup at exit (an AssertionError traceback after the report)
    cleanup = getattr(client, "_cleanup_kernel", None)
    if cleanup is not None:
        atexit.unregister(cleanup)
    return box.get("exc"), how


def _what_was_saved(exc: BaseException | None, how: str | None, in_cell: bool) -> str:
    """After a signal: what the kernel's running cell kept, for the failure line ("" when no cell ran); ``how``:
    :func:`_execute`'s second value; ``in_cell``: a cell was running."""
    from nbclient.exceptions import CellExecutionError

    if isinstance(exc, CellExecutionError) and exc.ename == "TrainingInterrupted":
        return f"the kernel was interrupted first (as Ctrl-C does) and the training cell said: {exc.evalue.strip()}"
    if isinstance(exc, CellExecutionError):
        return (f"the kernel was interrupted first (as Ctrl-C does); the running cell stopped with {exc.ename} "
                "(no nbkit training loop ran in it, so it saved nothing)")
    if in_cell and how == "killed":
        return (f"the kernel did not end the running cell within {INTERRUPT_WAIT_S:.0f} s of its interrupt and "
                "was killed: what that cell did since its last checkpoint is lost")
    return ""


def failure_line(name: str, exc: BaseException, cell_index: int | None, cell: dict | None,
                 timeout: int) -> str:
    """One line: which notebook and cell (1-based, with its first line) failed, how, and the fix."""
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    source = first_line((cell or {}).get("source", ""))
    where = f"{name} cell {cell_index + 1} ({source!r})" if cell_index is not None else name
    if isinstance(exc, CellTimeoutError):
        return (f"{where} did not finish within {timeout} s. Fix: raise --timeout (seconds per cell) "
                "or run a smaller NBKIT_SCALE.")
    if isinstance(exc, Terminated):
        saved = f"{exc.args[0]}; " if exc.args and exc.args[0] else ""
        return (f"{where}: stopped by a signal (SIGTERM from a time limit such as `timeout`, a scheduler or "
                f"`kill`; or Ctrl-C); {saved}"
                "the executed copy up to this cell is saved. Fix: give the run more time, or run a smaller "
                "NBKIT_SCALE or fewer notebooks (--only).")
    # AssertionError / AttributeError: nbclient 0.10-0.11's own cleanup after a dead kernel (km already gone)
    if (isinstance(exc, (DeadKernelError, AssertionError))
            or isinstance(exc, AttributeError) and "cleanup_resources" in str(exc)):
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
    """``"Linux x86_64, 2 CPUs, 1 × NVIDIA H200"`` (NVML, no CUDA context)."""
    import platform

    from nbkit.gpu.nvml import Nvml

    nv = Nvml(pcie=False)
    names = [d.name for d in nv.sample() if not d.mig]
    nv.shutdown()
    gpus = f"{len(names)} × {names[0]}" if names and len(set(names)) == 1 else (", ".join(names) or "no GPU")
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {gpus}"


def record_timings(out_dir: Path, seconds: dict[str, float]) -> Path:
    """Merge ``seconds`` into ``out_dir/timings.json`` with the machine (read by ``scripts/expect_table.py``)."""
    from nbkit import jsonio

    path = Path(out_dir) / "timings.json"
    old = jsonio.loads_strict(path.read_text(encoding="utf-8")).get("seconds", {}) if path.is_file() else {}
    jsonio.write_json(path, {"seconds": {**old, **seconds}, "machine": machine_summary(),
                             "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return path


def run_all(scale: str | None = None, only: list[str] | None = None, timeout: int = 3600,
            kernel_name: str = "python3", heartbeat_s: float = 10.0) -> int:
    """Execute the notebooks in order: 0 when all ran, 1 at the first failure, 130 after Ctrl-C, 143 after SIGTERM.

    ``scale``: ``smoke``, ``cpu`` or ``gpu`` (default ``NBKIT_SCALE``); ``only``: file-name prefixes; ``timeout``:
    seconds per cell; ``heartbeat_s``: seconds between log heartbeats. Whatever stops a notebook ends the run with one
    line on stderr and its executed copy saved; a signal interrupts the kernel first (:func:`_execute`).

    Raises:
        nbkit.errors.ConfigError: bad inputs, before any kernel starts (:func:`plan`).
    """
    import signal

    _STOP["signal"] = None
    previous = {}
    if threading.current_thread() is threading.main_thread():  # a signal -> report, save the copy, exit 143/130
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) is not signal.SIG_IGN:    # a background run keeps ignoring Ctrl-C
                previous[sig] = signal.signal(sig, _note_signal)
    try:
        return _run(plan(scale, only), timeout, kernel_name, heartbeat_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _client_class():
    """``NotebookClient`` that hands each stdout chunk of a cell to ``self.on_stdout`` (the loop's progress lines)."""
    from nbclient import NotebookClient

    class WatchedClient(NotebookClient):
        on_stdout = None

        def process_message(self, msg, cell, cell_index):
            content = msg.get("content") or {}
            if self.on_stdout is not None and msg.get("msg_type") == "stream" and content.get("name") == "stdout":
                self.on_stdout(content.get("text", ""))
            return super().process_message(msg, cell, cell_index)

    return WatchedClient


def _run(p: Plan, timeout: int, kernel_name: str, heartbeat_s: float) -> int:
    import signal

    import nbformat

    print(f"scale={p.scale}  runs={p.env['NBKIT_RUNS_DIR']}  notebooks={len(p.notebooks)}", flush=True)
    rows = [Row(path.stem, "not run") for path in p.notebooks]
    seconds: dict[str, float] = {}  # "01" -> wall seconds, for executed/timings.json
    for row, path in zip(rows, p.notebooks):
        nb = nbformat.read(path, as_version=4)
        current: dict = {}  # the cell being executed, for the failure line
        progress = NotebookProgress(path.stem, code_cells(nb), heartbeat_s=heartbeat_s)

        def track(cell, cell_index, current=current, progress=progress):
            if _STOP["signal"] is not None:      # no new cell after a signal (the kernel is being killed)
                raise Terminated()
            current.update(cell=cell, index=cell_index)
            progress.cell_started(cell, cell_index)

        client = _client_class()(nb, timeout=timeout, kernel_name=kernel_name,
                                 resources={"metadata": {"path": str(p.src)}}, on_cell_execute=track,
                                 on_cell_executed=progress.cell_finished)
        client.on_stdout = progress.cell_output
        started = time.time()
        # The kernel process's own output (not the cells': those are in the notebook)
        # goes to a log beside the copy, so a killed kernel's traceback stays off the console.
        kernel_log = p.out_dir / f"{path.stem}.kernel.log"
        with progress, open(kernel_log, "w") as log:
            exc, how = (Terminated(), None) if _STOP["signal"] is not None else _execute(client, p.env, log)
        if exc is not None or _STOP["signal"] is not None:   # each is reported, none re-raised
            if _STOP["signal"] is not None:  # the kernel's death or nbclient's error came of the signal
                exc = Terminated(_what_was_saved(exc, how, progress.running))
            nbformat.write(nb, p.out_dir / path.name)
            row.status, row.wall_s = "FAILED", progress.finish(ok=False)
            print(table(rows), flush=True)
            print(failure_line(path.name, exc, current.get("index"), current.get("cell"), timeout),
                  file=sys.stderr)
            print(f"executed copy (up to the failing cell): {p.out_dir / path.name}; "
                  f"kernel log: {kernel_log}", file=sys.stderr)
            if isinstance(exc, Terminated):
                return 130 if _STOP["signal"] == signal.SIGINT else 143
            return 130 if isinstance(exc, KeyboardInterrupt) else 1
        nbformat.write(nb, p.out_dir / path.name)
        row.headline = headline(path.name, p.out_dir.parent, since=started)
        row.status, row.wall_s = "ok", progress.finish(ok=True, headline=row.headline)
        seconds[path.name[:2]] = round(row.wall_s, 1)
        record_timings(p.out_dir, seconds)
    print(table(rows))
    print(f"executed copies: {p.out_dir}")
    return 0
