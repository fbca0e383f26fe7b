"""Loop callbacks (``Callback`` lists the events; any object with some of them will do), ``EarlyStopping``,
``ProgressFile``, and ``TrainerBridge``, which feeds the same views from ``transformers.Trainer``.
"""
from __future__ import annotations

import math
import os
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
        """After each optimizer step (e.g. ``torch.profiler`` ``prof.step()``); keep it cheap."""

    def on_log(self, loop, logs: dict) -> None:
        """Every ``log_every`` steps: step, epoch, loss, lr, grad_norm, samples_per_s, tokens_per_s, mfu (None:
        peak unknown), elapsed_s (s since fit() began), window_s (s this log window trained), skipped_steps.
        """

    def on_evaluate(self, loop, metrics: dict) -> None:
        """After an evaluation: eval_loss, eval_tokens, eval_perplexity or eval_accuracy + eval_examples."""

    def on_save(self, loop, path) -> None:
        """After a complete checkpoint was written to ``path``."""

    def on_train_end(self, loop, result) -> None:
        """After the last step, with the ``TrainResult``."""


class TrainerBridge(TrainerCallback):
    """A ``transformers.TrainerCallback`` that feeds nbkit views from ``Trainer``.

    live_plot: anything with ``update(step, **metrics)`` and ``close()`` (``nbkit.views.plots.LivePlot``);
    monitor: anything with ``record(step: int, metrics: dict)``. Trainer's ``learning_rate`` becomes
    ``lr``, and ``samples_per_s`` is measured between two logs (global batch x steps / wall s).
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


class ProgressFile:
    """Loop callback: the running ``fit()``'s step, loss and ETA in a small JSON file for a watcher outside the
    kernel (``nbkit run-notebooks``' heartbeat: ``nbkit.cli.notebook_progress.loop_status``).

    Written atomically (``nbkit.jsonio``), at most once per ``every_s`` seconds (the first and last always):
    ``{"step", "total", "loss" (last logged; None before), "elapsed_s" (since fit() began), "eta_s" (at this
    run's mean rate; None before a step), "updated" (Unix s), "done"}``. A failed write warns once, naming
    the file and the error, and the callback writes no more: progress reporting never stops training.
    """

    ENV = "NBKIT_PROGRESS_FILE"

    def __init__(self, path: str | Path, every_s: float = 1.0):
        self.path, self.every_s = Path(path), every_s
        self._t0 = self._last = 0.0
        self._step0, self._loss, self.failed = 0, None, None

    @classmethod
    def from_env(cls, env=None) -> "ProgressFile | None":
        """A ProgressFile writing to ``$NBKIT_PROGRESS_FILE``, or None when it is unset: the one place nbkit reads
        it (``nbkit run-notebooks`` sets it per notebook; ``Loop.setup()`` adds this callback unless one is there)."""
        path = (os.environ if env is None else env).get(cls.ENV)
        return cls(path) if path else None

    def on_train_begin(self, loop) -> None:
        self._t0, self._step0, self._loss = time.monotonic(), loop.state.step, None
        self._write(loop)

    def on_step_end(self, loop) -> None:
        if time.monotonic() - self._last >= self.every_s:
            self._write(loop)

    def on_log(self, loop, logs: dict) -> None:
        self._loss = logs.get("loss")

    def on_train_end(self, loop, result) -> None:
        self._write(loop, done=True)

    def status(self, loop, done: bool = False) -> dict:
        """The payload written now (see the class docstring)."""
        step, total = loop.state.step, loop.config.max_steps
        elapsed = time.monotonic() - self._t0
        done_here = step - self._step0  # a resumed run's earlier steps took no time here
        eta = (total - step) * elapsed / done_here if done_here > 0 else None
        return {"step": step, "total": total, "loss": self._loss, "elapsed_s": round(elapsed, 1),
                "eta_s": None if eta is None else round(eta, 1), "updated": time.time(), "done": done}

    def _write(self, loop, done: bool = False) -> None:
        from nbkit import jsonio
        from nbkit.errors import WriteError

        if self.failed is not None:
            return
        self._last = time.monotonic()
        try:
            jsonio.write_json(self.path, self.status(loop, done), indent=None)
        except (OSError, WriteError) as err:   # write_json reports a full disk as WriteError
            self.failed = f"{type(err).__name__}: {err}"
            warnings.warn(f"could not write the training progress file {self.path} ({self.failed}); training "
                          "goes on, and no further progress is written there.", UserWarning, stacklevel=2)
