"""Callbacks: how views (live plot, GPU monitor) subscribe to a training loop.

``Callback`` documents the events of ``nbkit.train.loop.Loop``; subclass it and
override what you need (the loop also accepts any object with some of these
methods). ``TrainerBridge`` feeds the same views from ``transformers.Trainer``
so its users get nbkit's live plot with one line::

    trainer = Trainer(..., callbacks=[TrainerBridge(live_plot=LivePlot())])
"""
from __future__ import annotations

import math
import time

from transformers import TrainerCallback

from nbkit.errors import ConfigError


class Callback:
    """Base class for loop callbacks; every method is optional and returns nothing.

    ``loop`` exposes ``config`` (TrainConfig), ``state`` (step, epoch,
    skipped_steps, history), ``device``, ``precision`` and ``model``.
    """

    def on_train_begin(self, loop) -> None:
        """Before the first step (after a resume has restored ``loop.state``)."""

    def on_step_end(self, loop) -> None:
        """After each optimizer step (e.g. ``torch.profiler`` ``prof.step()``); keep it cheap."""

    def on_log(self, loop, logs: dict) -> None:
        """Every ``log_every`` steps: step, epoch, loss, lr, grad_norm, samples_per_s,
        tokens_per_s, mfu (None when the peak is unknown), elapsed_s (s since fit() began),
        window_s (s this log window trained), skipped_steps."""

    def on_evaluate(self, loop, metrics: dict) -> None:
        """After an evaluation: eval_loss, eval_tokens, eval_perplexity or eval_accuracy + eval_examples."""

    def on_save(self, loop, path) -> None:
        """After a complete checkpoint was written to ``path``."""

    def on_train_end(self, loop, result) -> None:
        """After the last step, with the ``TrainResult``."""


class TrainerBridge(TrainerCallback):
    """A ``transformers.TrainerCallback`` that feeds nbkit views from ``Trainer``.

    live_plot: a ``nbkit.views.plots.LivePlot`` (or anything with ``update(step, **metrics)``
        and ``close()``).
    monitor: anything with ``record(step: int, metrics: dict)`` (e.g. a GPU
        monitor that stores telemetry next to each training log).

    Trainer logs ``loss``, ``learning_rate``, ``grad_norm`` every
    ``logging_steps``; the bridge renames them to nbkit's keys (``lr``) and adds
    ``samples_per_s`` measured between two logs (global batch x steps / wall
    seconds), since Trainer reports throughput only at the end.
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
    """Loop callback: set ``loop.stop_training`` when ``metric`` has not improved for ``patience`` evals.

    Args:
        patience: evaluations without improvement before stopping (>= 1).
        min_delta: smallest decrease (in the metric's unit, nats for ``eval_loss``) that
            counts as an improvement (>= 0).
        metric: a key of the loop's evaluation metrics, lower is better.

    Attributes: ``best`` (best value seen), ``best_step``, ``stopped_step`` (None while running),
    ``reason`` (one line, or None).

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
