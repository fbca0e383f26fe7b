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


def _lrs(result, after=0):
    return [h["lr"] for h in result.history if "loss" in h and h["step"] > after]


def test_changed_settings_are_listed_and_a_raised_max_steps_replans_the_schedule(tmp_path):
    first = _fit(tmp_path / "run", max_steps=4, lr=1e-3)
    with pytest.warns(UserWarning, match="differ from the checkpoint") as rec:
        res = _fit(tmp_path / "run", max_steps=8, lr=5e-2, batch_size=2)
    msg = str(rec[0].message)
    assert "lr: 0.001 -> 0.05 (NOT applied" in msg and "batch_size: 4 -> 2 (applied from step 5)" in msg
    assert "max_steps: 4 -> 8 (applied: the LR schedule is re-planned to 8 steps" in msg
    assert "will not change the weights" not in msg and "resume=False" in msg and "new output_dir" in msg
    # steps 5-8: the LR a fresh 8-step run (the checkpoint's lr 1e-3 and warm-up) has there, not the old end 0
    fresh = _fit(tmp_path / "fresh", max_steps=8, lr=1e-3)
    assert _lrs(res, after=4) == pytest.approx(_lrs(fresh, after=4), rel=1e-12) and min(_lrs(res, after=4)) > 0
    assert _lrs(res)[:4] == _lrs(first)           # the steps done keep the 4-step schedule's LR
    saved = checkpoint.load_latest(tmp_path / "run").load_state()["scheduler"]["nbkit_schedule"]
    assert saved["max_steps"] == 8                # a later resume continues the re-planned schedule


def test_a_lowered_max_steps_replans_the_schedule_too(tmp_path):
    _fit(tmp_path / "run", max_steps=8, lr=1e-3, checkpoint_every=2, keep_last=None)
    for c in checkpoint.list_checkpoints(tmp_path / "run")[1:]:      # as if stopped after step 2
        checkpoint.discard_checkpoint(c.path)
    with pytest.warns(UserWarning, match="max_steps: 8 -> 6"):
        res = _fit(tmp_path / "run", max_steps=6, lr=1e-3)
    fresh = _fit(tmp_path / "fresh", max_steps=6, lr=1e-3)
    assert _lrs(res, after=2) == pytest.approx(_lrs(fresh, after=2), rel=1e-12) and _lrs(res)[-1] > 0


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
    assert f"with output_dir={str(tmp_path)!r}" in str(rec[0].message)      # the recipes' folder names change
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


# --- D01: every example once per epoch, whatever setting changes on resume -------------------------
N_EX = 43                                    # not a multiple of any batch size below


def _indexed_data(n=N_EX, seed=11):
    """Example i: [2, 10 + i, ...random tokens of 2..24, 3]; lengths vary, so grouping reorders."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        body = torch.randint(60, 120, (2 + int(torch.randint(0, 23, (1,), generator=g)),), generator=g)
        out.append({"input_ids": torch.cat([torch.tensor([2, 10 + i]), body, torch.tensor([3])]),
                    "label": i % 2})
    return out


def _pad_collate(examples):
    T = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), T, dtype=torch.long)                   # (B, T)
    for r, e in enumerate(examples):
        ids[r, : len(e["input_ids"])] = e["input_ids"]
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor([e["label"] for e in examples])}


def _recording_model(seen):
    from loop_helpers import tiny_classifier

    m = tiny_classifier(vocab_size=128, hidden_size=16, num_hidden_layers=1, intermediate_size=32)
    m.register_forward_pre_hook(lambda mod, a, kw: seen.extend((kw["input_ids"][:, 1] - 10).tolist())
                                if mod.training else None, with_kwargs=True)
    return m


def _steps_to_epoch_end(consumed, batch_size, accum):
    return -(-(N_EX - consumed) // (batch_size * accum))


BASE = dict(batch_size=4, grad_accum_steps=1, seed=0, group_by_length=True)


def _resume_epoch(tmp_path, before: dict, after: dict, first_steps=3):
    """Train ``first_steps`` with ``before``, resume with ``after`` to past the epoch's end;
    returns the example indices trained in epoch 0 (the first N_EX recorded)."""
    seen, data = [], _indexed_data()
    cfg = dict(progress=False, precision="fp32", log_every=1, output_dir=tmp_path, warmup_ratio=0.0)
    a, b = {"lr": 1e-3, **BASE, **before}, {"lr": 1e-3, **BASE, **after}
    Loop(_recording_model(seen), TrainConfig(max_steps=first_steps, **cfg, **a), data, collate_fn=_pad_collate).fit()
    consumed = first_steps * a["batch_size"] * a["grad_accum_steps"]
    more = _steps_to_epoch_end(consumed, b["batch_size"], b["grad_accum_steps"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)               # the changed-settings warning
        Loop(_recording_model(seen), TrainConfig(max_steps=first_steps + more, **cfg, **b), data,
             collate_fn=_pad_collate).fit()
    return seen[:N_EX]


@pytest.mark.parametrize("before, after", [
    ({}, {"batch_size": 7}),                                       # grouped: group size 4 -> 7
    ({"group_by_length": False}, {"group_by_length": False, "batch_size": 3}),
    ({"group_by_length": False}, {"group_by_length": True}),      # grouping switched on mid-epoch
    ({}, {"group_by_length": False}),                              # and off
    ({}, {"seed": 5}),                                             # the order's seed
    ({"group_by_length": False}, {"group_by_length": False, "seed": 9}),
    ({}, {"grad_accum_steps": 3}),
    ({"grad_accum_steps": 2}, {"grad_accum_steps": 1, "batch_size": 5}),
    ({}, {"pad_to_multiple_of": 8}),
    ({}, {"class_weights": "balanced"}),
    ({}, {"max_grad_norm": None, "lr": 3e-3}),
], ids=["batch_size_grouped", "batch_size", "grouping_on", "grouping_off", "seed_grouped", "seed",
        "grad_accum", "grad_accum_and_batch", "pad_multiple", "class_weights", "clip_and_lr"])
def test_resume_with_a_changed_setting_sees_every_example_once_in_the_epoch(tmp_path, before, after):
    epoch0 = _resume_epoch(tmp_path, before, after)
    assert sorted(epoch0) == list(range(N_EX))


def test_a_changed_order_setting_is_named_with_what_happens_to_the_epoch(tmp_path):
    _fit(tmp_path, max_steps=2, group_by_length=True)
    with pytest.warns(UserWarning, match="differ from the checkpoint") as rec:
        _fit(tmp_path, max_steps=3, group_by_length=True, seed=4, batch_size=8)
    msg = str(rec[0].message)
    assert "seed: 0 -> 4 (applied from step 3; epoch 0 keeps the checkpoint's example order" in msg
    assert "batch_size: 4 -> 8 (applied from step 3; epoch 0 keeps" in msg and "starts with epoch 1" in msg


def test_checkpoint_stores_the_epoch_order_inputs_and_a_pre_order_checkpoint_rebuilds_them(tmp_path):
    _fit(tmp_path, max_steps=2, group_by_length=True, batch_size=3, seed=2)
    state = checkpoint.load_latest(tmp_path).load_state()
    assert state["order"] == {"epoch": 0, "seed": 2, "dataset_size": 48, "group_size": 3}
    del state["order"]                                                  # as written before this field
    assert checkpoint.saved_order(state) == {"epoch": 0, "seed": 2, "group_size": 3}


def test_resume_on_data_of_another_size_is_refused_naming_both_sizes(tmp_path):
    from loop_helpers import mlm_collate as collate
    from loop_helpers import tiny_mlm as model
    from loop_helpers import token_data

    from nbkit.errors import ConfigError

    _fit(tmp_path, max_steps=2)
    cfg = TrainConfig(max_steps=4, batch_size=4, progress=False, precision="fp32", output_dir=tmp_path)
    with pytest.raises(ConfigError, match="saved order is for 48 samples, this dataset has 40.*resume=False"):
        Loop(model(), cfg, token_data(n=40), collate_fn=collate).fit()


@pytest.mark.parametrize("world_before, world_after", [(1, 2), (2, 1), (2, 3)])
def test_resume_under_another_world_size_with_grouping_sees_the_rest_once(world_before, world_after):
    """Per-process batch 3 kept: the group size (3 x world size) changes with the world size."""
    import collections

    from nbkit.train.ddp.sampler import ResumableDistributedSampler

    lengths = [len(e["input_ids"]) for e in _indexed_data()]
    old = [ResumableDistributedSampler(N_EX, world_before, r, lengths=lengths, group_size=3 * world_before, seed=1)
           for r in range(world_before)]
    consumed = 4 * 3 * world_before                              # 4 local batches of 3 on each rank
    done = old[0].global_order(0)[:consumed]
    key = old[0].order_key(0)
    rest = []
    for r in range(world_after):
        s = ResumableDistributedSampler(N_EX, world_after, r, lengths=lengths, group_size=3 * world_after, seed=1)
        s.pin_order(key)
        s.set_epoch(0, start=consumed)
        rest += list(s)
    pad = (-(N_EX - consumed)) % world_after                     # DistributedSampler pads the tail
    counts = collections.Counter(done + rest)
    assert set(counts) == set(range(N_EX)) and sum(counts.values()) == N_EX + pad
    assert sum(c - 1 for c in counts.values()) == pad


def test_loop_checkpoint_of_one_process_resumes_under_two_ranks_in_the_saved_order(tmp_path):
    """restore_loop on two (simulated) ranks of a 2-process resume: the ranks' shards are the rest once."""
    from nbkit.train.batching import input_lengths
    from nbkit.train.ddp import group as D
    from nbkit.train.ddp.sampler import ResumableDistributedSampler

    seen = []
    cfg = dict(lr=1e-3, progress=False, precision="fp32", output_dir=tmp_path, group_by_length=True)
    data = _indexed_data()
    Loop(_recording_model(seen), TrainConfig(max_steps=3, batch_size=3, **cfg), data, collate_fn=_pad_collate).fit()
    shards = []
    for rank in range(2):
        loop = Loop(_recording_model([]), TrainConfig(max_steps=9, batch_size=3, **cfg), data, collate_fn=_pad_collate)
        loop.dist = D.DistInfo(rank=rank, world_size=2)
        loop.sampler = ResumableDistributedSampler(len(data), 2, rank, lengths=input_lengths(data),
                                                   group_size=3 * 2)  # the loop's sampler on rank r of 2: 6, 3 before
        checkpoint.restore_loop(loop, checkpoint.load_latest(tmp_path))
        loop.sampler.set_epoch(loop.state.epoch, start=loop.state.epoch_start)
        shards.append(list(loop.sampler))
    rest = shards[0] + shards[1]
    assert len(seen) == 9 and sorted(seen + rest[: N_EX - 9]) == list(range(N_EX))


def test_a_damaged_newest_checkpoint_is_skipped_for_the_one_before_it_and_named(tmp_path):
    _fit(tmp_path, max_steps=4, checkpoint_every=2)
    root = checkpoint.checkpoints_dir(tmp_path)
    weights = root / "step-000004" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])           # truncated by a full disk, still marked complete
    with pytest.warns(UserWarning, match=r"step-000004 is damaged: model.safetensors does not load .*resuming from "
                                         r"the checkpoint before it") as rec:
        res = _fit(tmp_path, max_steps=6, checkpoint_every=2)
    assert res.metrics["steps"] == 6 and res.history[0]["step"] == 1 and len(rec) >= 1
    assert [h["step"] for h in res.history if h.get("loss") is not None][2] == 3      # trained on from step 2
    for step in (4, 6):                                        # every complete checkpoint damaged: named, not a trace
        state = root / f"step-{step:06d}" / checkpoint.STATE_FILE
        state.write_bytes(b"not a torch file")
    with pytest.raises(checkpoint.DamagedCheckpoint, match=r"step-000004 is damaged: trainer_state.pt does not "
                                                           r"load.*no earlier complete checkpoint loads"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _fit(tmp_path, max_steps=8, checkpoint_every=2)
