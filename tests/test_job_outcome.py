"""How the training jobs end when they do not finish (nbkit.jobs.outcome): one line, no traceback.

The jobs' main() is called with the recipe replaced by the real Loop on a tiny BERT MLM
(tests/ddp_loop_job.py), so interrupts and errors leave through Loop.fit as in a real job."""
from __future__ import annotations

import warnings

import pytest
import torch
from ddp_loop_job import N_EVAL, N_TRAIN, pad_collate, premasked
from loop_helpers import tiny_mlm

from nbkit.errors import ConfigError
from nbkit.jobs import finetune, outcome, pretrain
from nbkit.train import Loop, TrainConfig
from nbkit.train.config import START_FRESH


class StopAt:
    """Loop callback: Ctrl-C (KeyboardInterrupt) after optimizer step ``step``."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, loop):
        if loop.state.step == self.step:
            raise KeyboardInterrupt


def tiny_loop(out, steps=10, ckpt_every=2, callbacks=(), resume=False):
    cfg = TrainConfig(max_steps=steps, batch_size=4, checkpoint_every=ckpt_every, output_dir=out, log_every=1,
                      progress=False, precision="fp32", resume=resume)
    return Loop(tiny_mlm(seed=0), cfg, premasked(N_TRAIN, 1), eval_data=premasked(N_EVAL, 2),
                collate_fn=pad_collate, callbacks=list(callbacks), device="cpu")


def run_pretrain_job(monkeypatch, fake, argv=()):
    """``nbkit.jobs.pretrain.main`` with ``run_pretraining`` replaced by ``fake(cfg, out_dir)``."""
    import nbkit.recipes.pretraining as recipe

    monkeypatch.setattr(recipe, "run_pretraining", lambda cfg, out, **kw: fake(cfg, out))
    return pretrain.main(["--scale", "smoke", *argv])


def test_ctrl_c_says_where_the_run_stopped_and_which_checkpoint_the_same_command_resumes(
        tmp_path, monkeypatch, capsys):
    rc = run_pretrain_job(monkeypatch, lambda cfg, out: tiny_loop(tmp_path / "run", callbacks=[StopAt(3)]).fit())
    err = capsys.readouterr().err
    assert rc == 130
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "nbkit.jobs.pretrain: interrupted at step 3 of 10" in err
    assert f"{tmp_path / 'run' / 'checkpoints' / 'step-000002'} (step 2)" in err
    assert "same command again to resume" in err and "--resume auto is the default" in err
    # ... and it does: the same settings resume from that checkpoint
    assert tiny_loop(tmp_path / "run", resume=True).fit().metrics["steps"] == 10
    assert "resumed from " + str(tmp_path / "run" / "checkpoints" / "step-000002") in capsys.readouterr().out


def test_ctrl_c_before_a_checkpoint_and_before_training_says_so(tmp_path, monkeypatch, capsys):
    rc = run_pretrain_job(monkeypatch, lambda cfg, out: tiny_loop(tmp_path / "a", ckpt_every=5,
                                                                   callbacks=[StopAt(2)]).fit())
    err = capsys.readouterr().err
    assert rc == 130 and "interrupted at step 2 of 10; no complete checkpoint in" in err
    assert "starts again from step 0" in err

    def before_training(cfg, out):
        raise KeyboardInterrupt   # e.g. while the tokenizer trains
    assert run_pretrain_job(monkeypatch, before_training) == 130
    assert "interrupted before training started" in capsys.readouterr().err


def test_only_rank_0_speaks_on_an_interrupt(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "1")
    rc = outcome.run_job("nbkit.jobs.pretrain", lambda argv: tiny_loop(tmp_path, callbacks=[StopAt(1)]).fit(),
                         [], pretrain.parser())
    assert rc == 130 and capsys.readouterr().err == ""


def test_an_nbkit_error_is_one_message_and_a_line_of_the_jobs_flags(monkeypatch, capsys):
    def refuse(cfg, out):
        raise ConfigError(f"a checkpoint at step 60 was written with max_steps=60 and output_dir=x; use {START_FRESH}")

    assert run_pretrain_job(monkeypatch, refuse) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("a checkpoint at step 60") == 1
    lines = err.strip().splitlines()
    assert lines[0].startswith("nbkit.jobs.pretrain: error: ")
    assert lines[-1] == ("in this job's flags: max_steps -> --max-steps, output_dir -> --output-dir, "
                         "resume=False -> --resume none")
    # a flag the job itself refuses: same shape, from the real parser path
    assert finetune.main(["--resume", "maybe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nbkit.jobs.finetune: error: resume='maybe': expected True or False") and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "in this job's flags: resume -> --resume"


def test_warnings_that_name_api_settings_get_the_flag_line(monkeypatch, capsys):
    def warn(cfg, out):
        warnings.warn(f"nothing to train: the checkpoint is at max_steps; use {START_FRESH}", UserWarning)

    with pytest.warns(UserWarning, match="nothing to train"):   # still the library's warning, shown as ever
        assert run_pretrain_job(monkeypatch, warn) == 0
    err = capsys.readouterr().err
    assert err.strip() == ("in this job's flags: max_steps -> --max-steps, output_dir -> --output-dir, "
                           "resume=False -> --resume none")


def test_flag_hint_reads_api_spellings_not_prose():
    flags = outcome.job_flags(pretrain.parser())
    assert flags["grad_accum_steps"] == "--grad-accum-steps" and flags["output_dir"] == "--output-dir"
    assert outcome.flag_hint("the same data and seed, in the same order", flags) is None
    assert outcome.flag_hint("lr=0.1 diverged; lower lr", flags) == "in this job's flags: lr -> --lr"
    assert outcome.flag_hint("resume=True continues", flags) == "in this job's flags: resume=True -> --resume auto"


def test_ranks_failing_alike_print_once_per_node(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", f"test-{tmp_path.name}-{id(tmp_path)}")
    monkeypatch.setattr(outcome.tempfile, "gettempdir", lambda: str(tmp_path))
    assert outcome.first_to_say("error: A") and not outcome.first_to_say("error: A")
    assert outcome.first_to_say("error: B")   # a rank-specific message is still printed
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert outcome.first_to_say("error: A")   # one process always speaks


def test_resume_names_the_world_size_that_wrote_the_checkpoint_and_the_one_resuming(tmp_path, capsys):
    with pytest.raises(KeyboardInterrupt):
        tiny_loop(tmp_path, steps=4, callbacks=[StopAt(3)]).fit()
    path = tmp_path / "checkpoints" / "step-000002" / "trainer_state.pt"
    state = torch.load(path, weights_only=False)
    torch.save({**state, "world_size": 2}, path)      # as 2 processes write it (test_launch does it for real)
    capsys.readouterr()
    tiny_loop(tmp_path, steps=4, resume=True).fit()
    out = capsys.readouterr().out
    assert "(step 2, written by 2 processes, resumed under 1)" in out
    assert "world size 1)" not in out


def test_fit_tags_what_leaves_it_with_where_the_run_stopped(tmp_path):
    loop = tiny_loop(tmp_path, callbacks=[StopAt(1)])
    with pytest.raises(KeyboardInterrupt) as e:
        loop.fit()
    assert e.value.nbkit_stopped == {"step": 1, "max_steps": 10, "output_dir": tmp_path, "signal": None,
                                     "seconds": None}


def test_a_later_run_of_the_same_job_says_its_error_again(monkeypatch, tmp_path):
    """torchrun without --standalone names every run "none": the next run (another launcher) must speak."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    monkeypatch.setattr(outcome.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(outcome.os, "getppid", lambda: 4242)
    assert outcome.first_to_say("error: A") and not outcome.first_to_say("error: A")
    monkeypatch.setattr(outcome.os, "getppid", lambda: 4343)          # the next torchrun
    assert outcome.first_to_say("error: A")
