"""Loop callbacks (``Callback`` lists the events; any object with some of them will do), ``EarlyStopping``,
``ProgressLine`` (plain progress lines), ``TensorBoardLogger``, and ``TrainerBridge``, which feeds the same
views from ``transformers.Trainer``.
"""
from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

from transformers import TrainerCallback

from nbkit.errors import ConfigError


class Callback:
    """Base class for loop callbacks; every method is optional and returns nothing. ``loop`` exposes
    ``config``, ``state`` (step, epoch, skipped_steps, history), ``device``, ``precision`` and ``model``.
    """

    def on_train_begin(self, loop) -> None:
        """Before the first step (after a resume has restored ``loop.state``)."""

    def on_step_end(self, loop) -> None:
        """After each optimizer step (e.g. ``torch.profiler`` ``prof.step()``); keep it cheap.
        ``loop.last_step``: that step's ``Loop.train_step`` dict."""

    def on_log(self, loop, logs: dict) -> None:
        """Every ``log_every`` steps: step, epoch, loss, lr, grad_norm, samples_per_s, tokens_per_s, mfu (None:
        peak unknown), elapsed_s (s since fit() began), window_s (s this log window trained), skipped_steps.
        """

    def on_evaluate(self, loop, metrics: dict) -> None:
        """After an evaluation: eval_loss, eval_tokens, eval_accuracy, and eval_perplexity or eval_examples."""

    def on_save(self, loop, path) -> None:
        """After a complete checkpoint was written to ``path``."""

    def on_train_end(self, loop, result) -> None:
        """After the last step, with the ``TrainResult``."""


class TrainerBridge(TrainerCallback):
    """A ``transformers.TrainerCallback`` that feeds nbkit views from ``Trainer``.

    live_plot: anything with ``update(step, **metrics)`` and ``close()``; monitor: anything with
    ``record(step, metrics)``. Trainer's ``learning_rate`` becomes ``lr``; ``samples_per_s`` is measured
    between two logs.
    """

    def __init__(self, live_plot=None, monitor=None):
        self.live_plot, self.monitor = live_plot, monitor
        self._last: tuple[int, float] | None = None

    def _feed(self, step: int, metrics: dict) -> None:
        if self.live_plot is not None:
            self.live_plot.update(step, **metrics)
        if self.monitor is not None:
            self.monitor.record(step, metrics)

    def on_train_begin(self, args, state, control, **kwargs):
        self._last = (state.global_step, time.perf_counter())

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = dict(logs or {})
        if not any(k.startswith("eval_") for k in logs) and "loss" in logs:
            now, step = time.perf_counter(), state.global_step
            out = {"loss": logs["loss"], "lr": logs.get("learning_rate"), "grad_norm": logs.get("grad_norm")}
            if self._last and step > self._last[0] and now > self._last[1]:
                global_batch = args.train_batch_size * args.gradient_accumulation_steps * max(args.world_size, 1)
                out["samples_per_s"] = (step - self._last[0]) * global_batch / (now - self._last[1])
            self._last = (step, now)
            self._feed(step, {k: v for k, v in out.items() if v is not None})

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._feed(state.global_step, {k: v for k, v in (metrics or {}).items() if k.startswith("eval_")})

    def on_train_end(self, args, state, control, **kwargs):
        if self.live_plot is not None:
            self.live_plot.close(out_dir=args.output_dir)


class EarlyStopping:
    """Loop callback: set ``loop.stop_training`` when ``metric`` (lower is better) has not improved by more
    than ``min_delta`` (its unit; nats for ``eval_loss``) for ``patience`` evaluations.

    Attributes: ``best``, ``best_step``, ``stopped_step`` (None while running), ``reason`` (one line, or None).

    Raises:
        ConfigError: patience < 1 or min_delta < 0.
    """

    def __init__(self, patience: int = 3, min_delta: float = 0.0, metric: str = "eval_loss"):
        if patience < 1 or min_delta < 0:
            raise ConfigError(f"EarlyStopping(patience={patience}, min_delta={min_delta}): "
                              "use patience >= 1 evaluations and min_delta >= 0")
        self.patience, self.min_delta, self.metric = patience, min_delta, metric
        self.best, self.best_step, self.stopped_step, self.reason = math.inf, None, None, None
        self._bad = 0

    def on_evaluate(self, loop, metrics: dict) -> None:
        value = metrics.get(self.metric)
        if value is None or not math.isfinite(value):
            return
        step = loop.state.step
        if value < self.best - self.min_delta:
            self.best, self.best_step, self._bad = value, step, 0
            return
        self._bad += 1
        if self._bad >= self.patience:
            loop.stop_training = True
            self.stopped_step = step
            self.reason = (f"{self.metric} has not improved by {self.min_delta:g} for {self.patience} evaluations "
                           f"(best {self.best:.4f} at step {self.best_step}); stopped at step {step}")


class ProgressLine:
    """Loop callback: a plain progress line on stdout after the first step, every ``every_s`` seconds and at the
    end, for job logs and executed notebooks (a widget bar shows in JupyterLab only)::

        train step 120/400 (30%) | loss 5.213 | lr 8.1e-04 | 10,900 tokens/s | elapsed 4 min 02 s | ETA 9 min 25 s

    ``loss``: the last log window's mean; tokens/s and ETA: this process's steps so far at the wall clock's
    rate, evaluations and checkpoints included.
    """

    PREFIX = "train step "   # what nbkit run-notebooks looks for in a cell's output

    def __init__(self, every_s: float = 30.0, stream=None, clock=time.monotonic):
        self.every_s, self.stream, self.clock = every_s, stream, clock
        self._t0, self._last, self._step0, self._tokens0, self._loss = 0.0, None, 0, 0, None

    def on_train_begin(self, loop) -> None:
        self._t0, self._last, self._loss = self.clock(), None, None
        self._step0, self._tokens0 = loop.state.step, loop.state.train_tokens

    def on_log(self, loop, logs: dict) -> None:
        self._loss = logs.get("loss")

    def on_step_end(self, loop) -> None:
        if self._last is None or self.clock() - self._last >= self.every_s:
            self._print(self.line(loop))

    def on_train_end(self, loop, result) -> None:
        self._print(self.line(loop, done=True))

    def line(self, loop, done: bool = False) -> str:
        """The line for ``loop`` now (``done``: the closing one, ETA replaced by ``done``)."""
        from nbkit.units import fmt_duration

        st, total = loop.state, loop.config.max_steps
        elapsed = self.clock() - self._t0
        last = getattr(loop, "last_step", None) or {}
        loss = self._loss
        if loss is None and last.get("n_label"):
            loss = last["loss_sum"] / last["n_label"]
        lr = last.get("lr", loop.optimizer.param_groups[0]["lr"])    # the LR the last step used
        parts = [f"{self.PREFIX}{st.step}/{total} ({st.step / total:.0%})",
                 "loss " + (f"{loss:.4g}" if loss is not None and math.isfinite(loss) else "-"), f"lr {lr:.2e}"]
        if elapsed > 0:
            parts.append(f"{(st.train_tokens - self._tokens0) / elapsed:,.0f} tokens/s")
        parts.append(f"elapsed {fmt_duration(elapsed)}")
        done_here = st.step - self._step0
        if done:
            parts.append("done" if st.step >= total else f"stopped before {total}")
        elif done_here > 0:
            parts.append(f"ETA {fmt_duration((total - st.step) * elapsed / done_here)}")
        return " | ".join(parts)

    def _print(self, text: str) -> None:
        self._last = self.clock()
        print(text, file=self.stream or sys.stdout, flush=True)


def after_earlier_event_files(log_dir: Path, clock=time.time, sleep=time.sleep) -> None:
    """Wait until the clock is past the creation second of every event file in ``log_dir`` (at most 1 s).

    TensorBoard reads event files in name order (that second first), and a resumed run's ``purge_step`` hides
    the earlier run's later events only when its file is read after theirs."""
    seconds = [int(f) for p in Path(log_dir).glob("events.out.tfevents.*")
               if (f := p.name.split(".")[3]).isdigit()]
    if seconds and clock() < max(seconds) + 1:
        sleep(max(seconds) + 1 - clock())


def set_aside_events(log_dir: Path) -> Path | None:
    """Move the event files in ``log_dir`` (not its subfolders) into ``log_dir/previous-<UTC time>/``
    (:func:`nbkit.atomic.set_aside`); returns that folder, None when there were none. TensorBoard shows each
    folder holding event files as a run, so the earlier run stays viewable under its own name."""
    from nbkit.atomic import set_aside

    log_dir = Path(log_dir)
    names = sorted(p.name for p in log_dir.glob("events.out.tfevents.*") if p.is_file()) if log_dir.is_dir() else []
    return set_aside(log_dir, names)


class TensorBoardLogger:
    """Loop callback: TensorBoard event files in ``log_dir`` (view: ``tensorboard --logdir runs/``).

    Scalars: ``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/tokens_per_s`` (and ``train/mfu`` when
    known) at every log; each number an evaluation reports as ``eval/<name>`` (counts left out); text ``config``
    (default the loop's ``TrainConfig``) at the start. A resumed run hides the events an earlier run wrote after
    its checkpoint (``purge_step``); a run from step 0 moves an earlier run's event files into
    ``log_dir/previous-<UTC time>/`` (path in ``set_aside``). Written by a background thread, flushed every
    ``flush_s`` s and at each checkpoint; a failed write warns once and stops logging, never training.

    Raises:
        ConfigError: the ``tensorboard`` package is missing (the install line named).
    """

    def __init__(self, log_dir: str | Path, config: dict | None = None, flush_s: float = 30.0):
        import importlib.util

        if importlib.util.find_spec("tensorboard") is None:
            raise ConfigError("report_to='tensorboard' needs the tensorboard package: pip install tensorboard "
                              "(an nbkit dependency), or set report_to='none'")
        self.log_dir, self.config, self.flush_s = Path(log_dir), config, flush_s
        self.writer, self.failed, self.set_aside = None, None, None

    def on_train_begin(self, loop) -> None:
        import dataclasses

        def start():
            from torch.utils.tensorboard import SummaryWriter

            step = loop.state.step
            if step:
                after_earlier_event_files(self.log_dir)
            else:
                self.set_aside = set_aside_events(self.log_dir)
                if self.set_aside is not None:
                    print(f"TensorBoard: a fresh run in {self.log_dir}; the earlier run's events moved to "
                          f"{self.set_aside} (shown as a run of its own)")
            self.writer = SummaryWriter(str(self.log_dir), purge_step=step + 1 if step else None,
                                        flush_secs=int(max(1, self.flush_s)))
            config = self.config if self.config is not None else dataclasses.asdict(loop.config)
            rows = "\n".join(f"| {k} | {v!r} |" for k, v in config.items())
            self.writer.add_text("config", "| field | value |\n|---|---|\n" + rows, global_step=step)
        self._guard(start, started=False)

    def on_log(self, loop, logs: dict) -> None:
        self._scalars("train", logs, ("loss", "lr", "grad_norm", "tokens_per_s", "samples_per_s", "mfu"))

    def on_evaluate(self, loop, metrics: dict) -> None:
        names = [k for k in metrics if not k.endswith(("_tokens", "_examples"))]
        self._scalars("eval", {k.removeprefix("eval_"): metrics[k] for k in names}, None, loop.state.step)
        self._guard(lambda: self.writer.flush())

    def on_save(self, loop, path) -> None:
        self._guard(lambda: self.writer.flush())

    def on_train_end(self, loop, result) -> None:
        self._guard(lambda: self.writer.close())

    def _scalars(self, group: str, values: dict, names, step=None) -> None:
        step = values.get("step") if step is None else step

        def write():
            for k in names or values:
                v = values.get(k)
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    self.writer.add_scalar(f"{group}/{k}", v, global_step=step)
        self._guard(write)

    def _guard(self, fn, started: bool = True) -> None:
        if self.failed is not None or (started and self.writer is None):
            return
        try:
            fn()
        except Exception as err:   # noqa: BLE001  (a metrics view never stops training)
            self.failed = f"{type(err).__name__}: {err}"
            warnings.warn(f"TensorBoard logging to {self.log_dir} failed ({self.failed}); training goes on without "
                          "it.", UserWarning, stacklevel=3)
