"""C11: one training run per output_dir (nbkit.train.run_lock) and cleanup that spares a live writer."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import loop_helpers as H
import pytest
from waiting import wait_until

from nbkit.errors import ConfigError
from nbkit.folder_lock import pid_alive
from nbkit.train import Loop, TrainConfig, checkpoint
from nbkit.train.run_lock import RunLock

HOLDER_NAME = RunLock.HOLDER_NAME

HELPER = Path(H.__file__)


def test_lock_is_exclusive_nests_and_names_its_holder(tmp_path):
    with RunLock(tmp_path) as first:
        holder = json.loads((tmp_path / HOLDER_NAME).read_text())   # strict JSON
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        first.acquire()                               # nested: same object
        first.release()
        assert first.held
        with pytest.raises(ConfigError) as e:
            RunLock(tmp_path).acquire()               # another run (here: another lock object)
        msg = str(e.value)
        assert f"pid {os.getpid()} on host {socket.gethostname()}" in msg and "its own output_dir" in msg
    assert not (tmp_path / HOLDER_NAME).exists()
    RunLock(tmp_path).acquire().release()             # free again


def test_dead_and_live_pids():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not pid_alive(int(done.stdout)) and pid_alive(os.getpid()) and not pid_alive(0)


@pytest.mark.slow
def test_second_process_is_refused_and_cleanup_spares_the_live_save(tmp_path):
    out, marker = tmp_path / "run", tmp_path / "hanging"
    # process 1: a real training run, paused inside its checkpoint write of step 3
    proc = subprocess.Popen([sys.executable, str(HELPER), str(out), "--hang-in-save", "3", "--marker", str(marker)])
    try:
        wait_until(lambda: marker.exists() or proc.poll() is not None, 600, "the helper's save of step 3")
        assert marker.exists(), "the helper never reached its save"
        live_tmp = checkpoint.checkpoints_dir(out) / f"step-000003.tmp-{proc.pid}"
        assert live_tmp.is_dir()
        # process 2 (this one): the same output_dir
        cfg = TrainConfig(max_steps=2, batch_size=4, checkpoint_every=1, output_dir=out, progress=False)
        loop = Loop(H.tiny_mlm(), cfg, H.token_data(), collate_fn=H.mlm_collate)
        with pytest.raises(ConfigError, match=rf"in use by another training run: pid {proc.pid} on host "
                                              rf"{socket.gethostname()}"):
            loop.fit()
        with pytest.raises(ConfigError, match="in use"):
            loop.save()
        # a writer that bypasses the lock still never deletes the live writer's folder
        checkpoint.save_checkpoint(out, 1, H.tiny_mlm(), {"step": 1})
        assert live_tmp.is_dir()
    finally:
        proc.kill()
        proc.wait()
    # the holder died (SIGKILL): the lock is free, and its temp folder is now stale
    cfg.resume = False   # the checkpoint saved above holds no optimizer state
    result = Loop(H.tiny_mlm(), cfg, H.token_data(), collate_fn=H.mlm_collate).fit()
    assert result.metrics["steps"] == 2 and not live_tmp.exists()
