import json
import signal
import subprocess
import sys
from pathlib import Path

import loop_helpers
import pytest
import torch
from waiting import wait_until

from nbkit.errors import CheckpointError
from nbkit.train import checkpoint

HELPER = Path(loop_helpers.__file__)


def _state(step):
    return {"step": step, "rng": torch.get_rng_state()}


def test_save_is_loadable_with_from_pretrained_and_keeps_last_n(tmp_path):
    from transformers import BertForMaskedLM

    model = loop_helpers.tiny_mlm()
    for step in (1, 2, 3):
        path = checkpoint.save_checkpoint(tmp_path, step, model, _state(step), keep_last=2)
    assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [2, 3]
    assert path.name == "step-000003" and (path / checkpoint.MARKER).is_file()
    again = BertForMaskedLM.from_pretrained(path / "model")
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    assert checkpoint.load_latest(tmp_path).load_state()["step"] == 3


def test_a_fresh_run_sets_the_earlier_runs_checkpoints_aside_so_keep_last_keeps_its_own(tmp_path, capsys):
    from nbkit.train import Loop, TrainConfig

    def fit(max_steps, **kw):
        cfg = TrainConfig(max_steps=max_steps, batch_size=4, checkpoint_every=2, keep_last=2, output_dir=tmp_path,
                          progress=False, progress_every_s=None, **kw)
        return Loop(loop_helpers.tiny_mlm(), cfg, loop_helpers.token_data(16), collate_fn=loop_helpers.mlm_collate,
                    device="cpu").fit()

    fit(8)                                                   # the earlier run: step-000006, step-000008
    result = fit(4, resume=False)                            # fresh: its 2 and 4 must not be pruned by 6 and 8
    assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [2, 4]
    assert result.checkpoint.is_dir() and result.checkpoint.name == "step-000004"
    aside = list(checkpoint.checkpoints_dir(tmp_path).glob("previous-*"))
    assert len(aside) == 1 and sorted(p.name for p in aside[0].iterdir()) == ["step-000006", "step-000008"]
    assert f"the earlier run's checkpoints moved to {aside[0]}" in capsys.readouterr().out
    with pytest.warns(UserWarning, match="max_steps: 4 -> 6"):   # a resume reads the new run's step 4, not the old 8
        assert fit(6).metrics["steps"] == 6
    assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [4, 6]


def test_reruns_in_one_folder_keep_a_bounded_number_of_earlier_runs_and_say_which_went(tmp_path, capsys):
    from nbkit.errors import ConfigError
    from nbkit.train import Loop, TrainConfig

    def fit(max_steps, **kw):
        cfg = TrainConfig(max_steps=max_steps, batch_size=4, keep_last=1, output_dir=tmp_path, resume=False,
                          progress=False, progress_every_s=None, **kw)
        Loop(loop_helpers.tiny_mlm(), cfg, loop_helpers.token_data(16), collate_fn=loop_helpers.mlm_collate,
             device="cpu").fit()

    def aside():
        return sorted(checkpoint.checkpoints_dir(tmp_path).glob("previous-*"))

    fit(1)
    fit(2)                                   # run 1's step-000001 set aside
    first = aside()
    assert len(first) == 1 and "removed" not in capsys.readouterr().out
    fit(3)                                   # run 2's step-000002 set aside; run 1's folder goes (keep_previous=1)
    out = capsys.readouterr().out
    [kept] = aside()
    assert [p.name for p in kept.iterdir()] == ["step-000002"] and not first[0].exists()
    assert f"removed {first[0]} (" in out and "keep_previous=1 keeps the newest 1 earlier run(s) (0: all)" in out
    fit(4, keep_previous=0)                  # 0: every earlier run stays
    assert len(aside()) == 2 and "removed" not in capsys.readouterr().out
    assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [4]
    with pytest.raises(ConfigError, match="keep_previous=-1 must be >= 0"):
        TrainConfig(max_steps=1, batch_size=1, keep_previous=-1)


def test_keep_steps_are_saved_and_never_pruned(tmp_path):
    """TrainConfig(keep_steps=...): the loop saves at those steps too, and pruning (keep_last) spares them."""
    from nbkit.errors import ConfigError
    from nbkit.train import Loop, TrainConfig

    cfg = TrainConfig(max_steps=6, batch_size=4, checkpoint_every=2, keep_last=1, keep_steps=[4, 3],
                      output_dir=tmp_path, progress=False, precision="fp32")
    assert cfg.keep_steps == (3, 4)
    Loop(loop_helpers.tiny_mlm(), cfg, loop_helpers.token_data(), collate_fn=loop_helpers.mlm_collate).fit()
    assert [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [3, 4, 6]   # 2 pruned; 3 off the interval
    with pytest.raises(ConfigError, match=r"keep_steps \[7\] outside 1..6"):
        TrainConfig(max_steps=6, batch_size=4, keep_steps=(2, 7), output_dir=tmp_path)
    with pytest.raises(ConfigError, match="keep_steps needs output_dir"):
        TrainConfig(max_steps=6, batch_size=4, keep_steps=(2,))


def test_load_model_weights_restores_tied_decoder_and_rejects_other_shapes(tmp_path):
    src, dst = loop_helpers.tiny_mlm(seed=1), loop_helpers.tiny_mlm(seed=2)
    path = checkpoint.save_checkpoint(tmp_path, 1, src, _state(1))
    checkpoint.load_model_weights(dst, path / "model")
    assert torch.equal(dst.cls.predictions.decoder.weight, src.cls.predictions.decoder.weight)
    with pytest.raises(CheckpointError, match="same config"):
        checkpoint.load_model_weights(loop_helpers.tiny_mlm(hidden_size=16), path / "model")


def test_incomplete_checkpoints_are_skipped_with_a_warning(tmp_path):
    model = loop_helpers.tiny_mlm()
    checkpoint.save_checkpoint(tmp_path, 4, model, _state(4))
    root = checkpoint.checkpoints_dir(tmp_path)
    (root / "step-000008.tmp-99999").mkdir()          # a writer killed mid-save
    (root / "step-000009").mkdir()                    # no COMPLETE marker
    with pytest.warns(UserWarning, match="incomplete checkpoint") as rec:
        assert checkpoint.load_latest(tmp_path).step == 4
    assert len(rec) == 2
    checkpoint.save_checkpoint(tmp_path, 5, model, _state(5))   # removes the stale tmp dir
    assert not (root / "step-000008.tmp-99999").exists()


def _run_helper(out, *args, wait=True):
    cmd = [sys.executable, str(HELPER), str(out), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900) if wait else subprocess.Popen(cmd)


def _history(out):
    return [(h["step"], h["loss"], h["lr"]) for h in json.loads(Path(out, "history.json").read_text())]


@pytest.mark.slow
def test_sigkill_then_resume_reproduces_every_loss_and_lr(tmp_path):
    loop_helpers.main([str(tmp_path / "full")])                  # uninterrupted, in this process
    killed = _run_helper(tmp_path / "cut", "--kill-after", "5")  # checkpoint at 3, killed after 5
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert [c.step for c in checkpoint.list_checkpoints(tmp_path / "cut")] == [3]
    loop_helpers.main([str(tmp_path / "cut")])                   # resumes from step 3
    full, resumed = _history(tmp_path / "full"), _history(tmp_path / "cut")
    assert [s for s, _, _ in resumed] == list(range(1, 9))
    assert resumed == full                                       # bitwise: same losses and LR, step for step


@pytest.mark.slow
def test_sigkill_during_save_keeps_previous_checkpoint(tmp_path):
    out, marker = tmp_path / "run", tmp_path / "hanging"
    proc = _run_helper(out, "--hang-in-save", "6", "--marker", str(marker), wait=False)
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, 600, "the helper's save of step 6")
        assert marker.exists(), "the helper never reached the save of step 6"
    finally:
        proc.kill()                                              # SIGKILL while writing step 6
        proc.wait()
    with pytest.warns(UserWarning, match="incomplete checkpoint"):
        assert checkpoint.load_latest(out).step == 3
    with pytest.warns(UserWarning, match="incomplete checkpoint"):
        loop_helpers.main([str(out)])                            # resume picks step 3 and finishes
    assert [s for s, _, _ in _history(out)] == list(range(1, 9))
    assert [c.step for c in checkpoint.list_checkpoints(out)] == [6, 8]
