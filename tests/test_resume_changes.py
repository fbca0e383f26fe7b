"""Resuming with a TrainConfig that differs from the checkpoint's: said, not silent.

Also the CheckpointError for a model that no longer fits its checkpoint (summary and fix first).
"""
from __future__ import annotations

import shutil
import warnings

import pytest
import torch
from loop_helpers import mlm_collate, tiny_mlm, token_data

from nbkit.errors import CheckpointError
from nbkit.train import Loop, TrainConfig, checkpoint


def _fit(out, **kw):
    base = dict(batch_size=4, log_every=1, progress=False, precision="fp32", warmup_ratio=0.25,
                output_dir=out)
    base.update(kw)
    return Loop(tiny_mlm(), TrainConfig(**base), token_data(), collate_fn=mlm_collate).fit()


def test_checkpoint_records_the_config_as_plain_data(tmp_path):
    _fit(tmp_path, max_steps=2, lr=1e-3)
    saved = checkpoint.load_latest(tmp_path).load_state()["config"]
    assert saved["lr"] == 1e-3 and saved["max_steps"] == 2 and saved["output_dir"] == str(tmp_path)


def test_changed_settings_are_listed_and_the_checkpoint_schedule_continues(tmp_path):
    _fit(tmp_path, max_steps=4, lr=1e-3)
    with pytest.warns(UserWarning, match="differ from the checkpoint") as rec:
        res = _fit(tmp_path, max_steps=8, lr=5e-2, batch_size=2)
    msg = str(rec[0].message)
    assert "lr: 0.001 -> 0.05 (NOT applied" in msg
    assert "max_steps: 4 -> 8" in msg and "batch_size: 4 -> 2 (applied from step 5)" in msg
    assert "will not change the weights" in msg and "resume=False" in msg and "new output_dir" in msg
    lrs = [h["lr"] for h in res.history if "loss" in h and h["step"] > 4]
    assert lrs == [0.0] * 4                       # what the warning says: the old linear schedule's end


def test_resume_with_the_same_settings_is_silent_and_older_configs_compare_what_they_have(tmp_path):
    _fit(tmp_path, max_steps=3, checkpoint_every=1, keep_last=None)
    shutil.rmtree(checkpoint.checkpoints_dir(tmp_path) / "step-000003")   # as if killed after step 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # any warning fails the test
        _fit(tmp_path, max_steps=3)
    shutil.rmtree(checkpoint.checkpoints_dir(tmp_path) / "step-000003")
    ck = checkpoint.load_latest(tmp_path)
    state = ck.load_state()
    del state["config"]["group_by_length"]         # a config from before that field existed
    torch.save(state, ck.path / checkpoint.STATE_FILE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fit(tmp_path, max_steps=3, group_by_length=True).metrics["steps"] == 3  # not compared


def test_checkpoint_past_max_steps_warns_nothing_to_train(tmp_path):
    _fit(tmp_path, max_steps=6)
    with pytest.warns(UserWarning, match=r"checkpoint at step 6 >= max_steps=3: nothing to train") as rec:
        res = _fit(tmp_path, max_steps=3)
    assert "raise max_steps above 6" in str(rec[0].message) and "resume=False" in str(rec[0].message)
    assert res.metrics["steps"] == 6


def test_mismatched_model_error_puts_summary_and_fix_first_and_truncates(tmp_path):
    path = checkpoint.save_checkpoint(tmp_path, 1, tiny_mlm(), {"step": 1})
    with pytest.raises(CheckpointError) as err:
        checkpoint.load_model_weights(tiny_mlm(hidden_size=16), path / "model")
    msg = str(err.value)
    head = msg.split("First differences:")[0]
    assert "weight shapes differ" in head and "hidden_size 32 -> 16" in head
    assert "same config" in head and "resume=False" in head
    assert msg.count(" in the checkpoint, ") == 5 and "more." in msg
