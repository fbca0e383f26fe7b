"""C15: deleting a checkpoint (keep_last pruning) can be killed at any point without
leaving one that is marked COMPLETE but lacks files (nbkit.train.checkpoint)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import loop_helpers as H
import pytest
import torch

from nbkit.train import checkpoint
from nbkit.train.checkpoint import missing_files, remove_stale


class Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs (not even ``ignore_errors``)."""


def _files(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def test_kill_at_every_point_of_pruning_never_leaves_a_marked_half_checkpoint(tmp_path, monkeypatch):
    model = H.tiny_mlm()
    real_unlink, real_rmdir = os.unlink, os.rmdir
    points = 0
    for kill_after in range(12):
        out = tmp_path / f"k{kill_after}"
        for step in (1, 2):
            checkpoint.save_checkpoint(out, step, model, {"step": step}, keep_last=2)
        full = {c.path.name: _files(c.path) for c in checkpoint.list_checkpoints(out)}
        calls = {"n": 0}

        def dying(fn):
            def wrapped(*a, **k):
                if calls["n"] == kill_after:
                    raise Killed
                calls["n"] += 1
                return fn(*a, **k)
            return wrapped
        monkeypatch.setattr(os, "unlink", dying(real_unlink))
        monkeypatch.setattr(os, "rmdir", dying(real_rmdir))
        try:
            checkpoint.save_checkpoint(out, 3, model, {"step": 3}, keep_last=2)   # prunes step 1
            killed = False
        except Killed:
            killed = True
        finally:
            monkeypatch.setattr(os, "unlink", real_unlink)
            monkeypatch.setattr(os, "rmdir", real_rmdir)
        points += killed
        root = checkpoint.checkpoints_dir(out)
        for p in root.glob("step-??????"):                    # every name the loader considers
            if (p / checkpoint.MARKER).exists():
                assert _files(p) == full.get(p.name, _files(p)), f"kill after {kill_after} removals: {p} " \
                                                                  "kept COMPLETE with files missing"
        assert {c.step for c in checkpoint.list_checkpoints(out, warn=False)} >= {2}
        if not killed:
            break
    assert points >= 3                                        # the kill really hit the deletion


def test_next_save_removes_the_leftover_of_a_killed_prune(tmp_path, monkeypatch):
    model = H.tiny_mlm()
    for step in (1, 2):
        checkpoint.save_checkpoint(tmp_path, step, model, {"step": step}, keep_last=2)
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: (_ for _ in ()).throw(Killed))
    with pytest.raises(Killed):
        checkpoint.save_checkpoint(tmp_path, 3, model, {"step": 3}, keep_last=2)   # killed right after the rename
    monkeypatch.undo()
    root = checkpoint.checkpoints_dir(tmp_path)
    leftover = root / f"step-000001.old-{os.getpid()}"
    assert leftover.is_dir() and not (root / "step-000001").exists()
    assert checkpoint.load_latest(tmp_path).step == 3
    checkpoint.save_checkpoint(tmp_path, 4, model, {"step": 4}, keep_last=2)
    assert not leftover.exists() and [c.step for c in checkpoint.list_checkpoints(tmp_path)] == [3, 4]


def test_marked_checkpoint_missing_files_is_skipped_with_a_warning(tmp_path):
    model = H.tiny_mlm()
    for step in (1, 2):
        checkpoint.save_checkpoint(tmp_path, step, model, {"step": step, "rng": torch.get_rng_state()})
    broken = checkpoint.checkpoints_dir(tmp_path) / "step-000002"
    (broken / "model" / "model.safetensors").unlink()        # e.g. half-deleted by an older nbkit
    assert missing_files(broken, checkpoint.STATE_FILE) == ["model/*.safetensors"]
    with pytest.warns(UserWarning, match=r"damaged checkpoint .*step-000002.*lacks model/\*\.safetensors"):
        assert checkpoint.load_latest(tmp_path).step == 1


def test_stale_cleanup_spares_live_writers_only(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        live = tmp_path / f"step-000005.tmp-{sleeper.pid}"
        gone = [tmp_path / f"step-000005.tmp-{int(dead.stdout)}", tmp_path / f"step-000004.old-{os.getpid()}"]
        for p in (live, *gone, tmp_path / "step-000003"):
            p.mkdir()
        assert sorted(remove_stale(tmp_path)) == sorted(gone)
        assert live.is_dir() and (tmp_path / "step-000003").is_dir()
    finally:
        sleeper.kill()
        sleeper.wait()
