"""EarlyStopping ends a run when the held-out loss stops improving, and the loop honours it."""
from types import SimpleNamespace

import pytest

from nbkit.errors import ConfigError
from nbkit.train import EarlyStopping, Loop, TrainConfig
from tests.loop_helpers import mlm_collate, tiny_mlm, token_data


def feed(cb, losses):
    loop = SimpleNamespace(stop_training=False, state=SimpleNamespace(step=0))
    for i, v in enumerate(losses, 1):
        loop.state.step = i * 10
        cb.on_evaluate(loop, {"eval_loss": v})
        if loop.stop_training:
            return loop
    return loop


def test_stops_after_patience_evals_without_improvement():
    cb = EarlyStopping(patience=2, min_delta=0.01)
    loop = feed(cb, [5.0, 4.0, 3.995, 4.2, 3.0])
    assert loop.stop_training and cb.stopped_step == 40 and cb.best == 4.0 and cb.best_step == 20
    assert "best 4.0000 at step 20" in cb.reason


def test_improvement_resets_patience():
    cb = EarlyStopping(patience=2)
    assert not feed(cb, [5.0, 5.1, 4.0, 4.1, 3.9]).stop_training


def test_bad_arguments():
    with pytest.raises(ConfigError, match="patience >= 1"):
        EarlyStopping(patience=0)


class Rising:
    """Reports a rising eval loss, whatever the model does."""

    def __init__(self):
        self.n = 0

    def on_evaluate(self, loop, metrics):
        self.n += 1
        metrics["eval_loss"] = float(self.n)


def test_loop_stops_early_and_saves_that_step(tmp_path):
    stopper = EarlyStopping(patience=2)
    cfg = TrainConfig(max_steps=40, batch_size=4, eval_every=5, output_dir=tmp_path, progress=False, log_every=5)
    res = Loop(tiny_mlm(), cfg, token_data(), eval_data=token_data(8, seed=1), collate_fn=mlm_collate,
               callbacks=[Rising(), stopper]).fit()
    assert res.metrics["steps"] == 15 == stopper.stopped_step      # evals at 5 (best), 10, 15 -> stop
    assert res.checkpoint.name.endswith("000015")
