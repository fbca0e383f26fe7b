"""TensorBoard events written during training, read back with TensorBoard's own reader (EventAccumulator):
the loop's scalars, every evaluation number, the config as text; a resumed run hides what an earlier run logged
after its checkpoint; ``report_to="none"`` writes nothing; the recipes write ``<run>/tensorboard`` by default."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop_helpers import mlm_collate, tiny_mlm, token_data  # noqa: E402

from nbkit.train import Loop, TensorBoardLogger, TrainConfig  # noqa: E402
from nbkit.train import checkpoint as ckpt  # noqa: E402


def events(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return acc


def steps(acc, tag):
    return [e.step for e in acc.Scalars(tag)]


def _loop(out, max_steps=6, **kw):
    cfg = TrainConfig(max_steps=max_steps, batch_size=4, log_every=2, eval_every=3, output_dir=out, progress=False,
                      progress_every_s=None, report_to="tensorboard", **kw)
    return Loop(tiny_mlm(), cfg, token_data(24), token_data(8, seed=1), collate_fn=mlm_collate, device="cpu")


def test_the_loop_writes_scalars_eval_numbers_and_its_config(tmp_path):
    result = _loop(tmp_path).fit()
    acc = events(tmp_path / "tensorboard")
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/samples_per_s"} <= tags
    assert {"eval/loss", "eval/perplexity", "eval/accuracy"} <= tags and "train/mfu" not in tags   # no CPU peak
    assert not any(t.endswith(("_tokens", "_examples")) for t in tags)                              # counts left out
    assert steps(acc, "train/loss") == [2, 4, 6] and steps(acc, "eval/loss") == [3, 6]
    logged = {h["step"]: h for h in result.history if "loss" in h}
    assert [e.value for e in acc.Scalars("train/loss")] == pytest.approx([logged[s]["loss"] for s in (2, 4, 6)])
    final = result.history[-1]
    assert acc.Scalars("eval/perplexity")[-1].value == pytest.approx(final["eval_perplexity"], rel=1e-6)
    assert 0.0 <= acc.Scalars("eval/accuracy")[-1].value <= 1.0       # masked-token top-1
    config = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| max_steps | 6 |" in config and "| report_to | 'tensorboard' |" in config


def test_a_resumed_writer_waits_for_the_next_second_so_its_file_is_read_after_the_earlier_ones(tmp_path):
    from nbkit.train.callbacks import after_earlier_event_files

    slept = []
    (tmp_path / "events.out.tfevents.1700000005.host.42.9").write_bytes(b"")
    (tmp_path / "events.out.tfevents.1700000003.host.42.10").write_bytes(b"")
    after_earlier_event_files(tmp_path, clock=lambda: 1700000005.25, sleep=slept.append)
    assert slept == [pytest.approx(0.75)]                    # the same second as the newest file: wait it out
    after_earlier_event_files(tmp_path, clock=lambda: 1700000006.0, sleep=slept.append)
    after_earlier_event_files(tmp_path / "none", clock=lambda: 0.0, sleep=slept.append)
    assert len(slept) == 1                                   # a later second, or no earlier file: no wait


def test_a_resumed_run_hides_what_an_earlier_run_logged_after_its_checkpoint(tmp_path):
    _loop(tmp_path, checkpoint_every=2, keep_last=0).fit()
    for c in ckpt.list_checkpoints(tmp_path)[1:]:      # keep step 2: as if the run had died before saving 4
        ckpt.discard_checkpoint(c.path)
    _loop(tmp_path, checkpoint_every=2, keep_last=0).fit()
    acc = events(tmp_path / "tensorboard")
    assert steps(acc, "train/loss") == [2, 4, 6], "steps 4 and 6 once: the resumed run's, not both runs'"
    assert steps(acc, "eval/loss") == [3, 6]


def test_report_to_none_writes_no_events_and_a_bad_value_is_refused(tmp_path):
    cfg = TrainConfig(max_steps=2, batch_size=4, output_dir=tmp_path, progress=False, progress_every_s=None)
    loop = Loop(tiny_mlm(), cfg, token_data(8), collate_fn=mlm_collate, device="cpu")
    loop.fit()
    assert cfg.report_to == "none" and not (tmp_path / "tensorboard").exists()
    assert not any(isinstance(cb, TensorBoardLogger) for cb in loop.callbacks)
    with pytest.raises(ValueError, match="report_to='wandb': use one of 'tensorboard', 'none'"):
        TrainConfig(max_steps=1, batch_size=1, report_to="wandb")
    from nbkit.errors import ConfigError
    from nbkit.recipes.finetuning import FinetuneConfig
    from nbkit.recipes.pretraining import PretrainConfig

    for recipe in (PretrainConfig, FinetuneConfig):                 # refused when the recipe is built, not at fit
        with pytest.raises(ConfigError, match="report_to='wandb': use one of 'tensorboard', 'none'"):
            recipe.for_scale("smoke", report_to="wandb")


def test_a_failing_writer_warns_once_and_training_goes_on(tmp_path, monkeypatch):
    from torch.utils.tensorboard import SummaryWriter

    def broken(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SummaryWriter, "add_scalar", broken)
    with pytest.warns(UserWarning, match="TensorBoard logging to .* failed .*No space left") as rec:
        result = _loop(tmp_path).fit()
    assert result.metrics["steps"] == 6 and sum("TensorBoard" in str(w.message) for w in rec) == 1


def test_the_pretrain_job_has_report_to_and_the_recipe_writes_its_config(tmp_path, runs_tmp):
    from nbkit.jobs import pretrain
    from nbkit.recipes.pretraining import PretrainConfig, run_pretraining

    a = pretrain.parser().parse_args(["--scale", "smoke", "--report-to", "none", "--checkpoint-minutes", "0"])
    cfg, _ = pretrain.config(a)
    assert cfg.report_to == "none" and cfg.checkpoint_minutes == 0
    assert PretrainConfig.for_scale("smoke").report_to == "tensorboard"
    run_pretraining(PretrainConfig.for_scale("smoke", max_steps=4, eval_every=2, log_every=1, progress=False),
                    tmp_path / "mlm")
    acc = events(tmp_path / "mlm" / "tensorboard")
    assert steps(acc, "train/loss") == [1, 2, 3, 4] and steps(acc, "eval/loss") == [2, 4]
    config = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| model | 'tiny' |" in config and "| block_size | 64 |" in config      # the recipe's fields


def test_a_fresh_run_in_a_used_folder_shows_only_its_own_steps_and_the_old_run_beside_it(tmp_path, capsys):
    _loop(tmp_path, max_steps=6, checkpoint_every=2).fit()
    _loop(tmp_path, max_steps=4, resume=False).fit()             # a fresh run in the same folder
    acc = events(tmp_path / "tensorboard")
    assert steps(acc, "train/loss") == [2, 4] and steps(acc, "eval/loss") == [3, 4], "only the new run's steps"
    config = acc.Tensors("config/text_summary")
    assert len(config) == 1 and "| max_steps | 4 |" in config[0].tensor_proto.string_val[0].decode()
    previous = list((tmp_path / "tensorboard").glob("previous-*"))
    assert len(previous) == 1 and steps(events(previous[0]), "train/loss") == [2, 4, 6]   # the old run, whole
    out = capsys.readouterr().out
    assert f"the earlier run's events moved to {previous[0]}" in out
    assert f"the earlier run's checkpoints moved to {tmp_path / 'checkpoints' / 'previous-'}" in out


def test_a_run_killed_before_its_first_checkpoint_does_not_mix_with_the_next(tmp_path):
    _loop(tmp_path, max_steps=4).fit()
    ckpt.discard_checkpoint(ckpt.load_latest(tmp_path).path)     # as if killed before any save: resume=True starts at 0
    _loop(tmp_path, max_steps=2).fit()
    assert steps(events(tmp_path / "tensorboard"), "train/loss") == [2]
