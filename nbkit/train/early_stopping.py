"""Stop training when the held-out loss stops improving (a loop callback).

The `gpu` scale pretrains for many passes over about a million tokens of in-domain
text, so the held-out MLM loss can eventually rise while the training loss keeps
falling (overfitting). :class:`EarlyStopping` watches ``eval_loss`` after each
evaluation (``TrainConfig.eval_every``) and asks the loop to stop after ``patience``
evaluations without an improvement of at least ``min_delta`` nats, as Keras'
``EarlyStopping`` and transformers' ``EarlyStoppingCallback`` do. The loop then saves a
final checkpoint at that step; the best step and loss are kept on the callback.
"""
from __future__ import annotations

import math

from nbkit.errors import ConfigError


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
