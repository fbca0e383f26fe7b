"""C08: DataLoader workers and a /dev/shm too small for their batches fail fast (nbkit.train.workers)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import loop_helpers as H
import pytest

from nbkit.errors import ConfigError
from nbkit.train import Loop, TrainConfig, workers

REPO = Path(__file__).resolve().parents[1]


def fake_statvfs(free_bytes):
    return lambda path: SimpleNamespace(f_bavail=free_bytes // 4096, f_frsize=4096, f_blocks=free_bytes // 4096)


def test_batch_bytes_round_each_tensor_to_a_page():
    import torch

    batch = {"input_ids": torch.zeros(16, 64, dtype=torch.int64),   # 8 KiB
             "labels": torch.zeros(16, dtype=torch.int64),           # 128 B -> one 4 KiB page
             "meta": ["not a tensor"]}
    assert workers.batch_shm_bytes(batch) == 8192 + 4096
    assert workers.shm_need_bytes(12288, num_workers=2) == 12288 * (2 * 2 + 2)


def test_preflight_names_the_numbers_and_the_fixes():
    data = H.token_data(n=32, length=64)   # batch of 16: 3 int64 tensors of (16, 64) = 24 KiB
    with pytest.raises(ConfigError) as e:
        workers.check_worker_shm(data, H.mlm_collate, 16, 2, statvfs=fake_statvfs(64 * 1024))
    msg = str(e.value)
    assert "num_workers=2" in msg and "144 KiB" in msg and "64 KiB free" in msg and "24 KiB per batch" in msg
    assert "--shm-size" in msg and "shm_size" in msg and "num_workers=0" in msg
    assert "emptyDir with `medium: Memory` at /dev/shm" in msg          # the fix in a Kubernetes pod
    with pytest.warns(UserWarning, match="under twice"):
        workers.check_worker_shm(data, H.mlm_collate, 16, 2, statvfs=fake_statvfs(160 * 1024))
    got = workers.check_worker_shm(data, H.mlm_collate, 16, 2, statvfs=fake_statvfs(2**30))
    assert got == {"batch_bytes": 24576, "need_bytes": 6 * 24576, "free_bytes": 2**30}
    assert workers.check_worker_shm(data, H.mlm_collate, 16, 0, statvfs=fake_statvfs(0)) == {}

    def no_shm(path):
        raise FileNotFoundError(path)
    assert workers.check_worker_shm(data, H.mlm_collate, 16, 2, statvfs=no_shm) == {}


def test_loop_fails_before_the_first_step(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "shm_free_bytes", lambda *a, **k: 64 * 1024)
    steps = []

    class Count:
        def on_step_end(self, loop):
            steps.append(loop.state.step)
    cfg = TrainConfig(max_steps=2, batch_size=16, num_workers=2, progress=False)
    with pytest.raises(ConfigError, match="num_workers=0"):
        Loop(H.tiny_mlm(), cfg, H.token_data(n=32, length=64), collate_fn=H.mlm_collate, callbacks=[Count()]).fit()
    assert steps == []


def test_lost_batches_become_a_config_error_and_other_errors_pass():
    def dying():
        yield 1
        raise RuntimeError("DataLoader timed out after 300.0 seconds")
    it = workers.guard_batches(dying(), num_workers=2)
    assert next(it) == 1
    with pytest.raises(ConfigError, match=r"stopped delivering batches.*free now.*--shm-size.*num_workers=0"):
        next(it)

    def user_bug():
        raise RuntimeError("my collate_fn is wrong")
        yield
    with pytest.raises(RuntimeError, match="my collate_fn"):
        next(workers.guard_batches(user_bug(), num_workers=2))
    assert workers.loader_timeout(0) == 0 and workers.loader_timeout(2) == workers.WORKER_TIMEOUT_S


SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    import loop_helpers as H
    from nbkit.errors import ConfigError
    from nbkit.train import Loop, TrainConfig, workers

    def run():
        cfg = TrainConfig(max_steps=3, batch_size=16, num_workers=2, progress=False)
        t0 = time.monotonic()
        try:
            Loop(H.tiny_mlm(), cfg, H.token_data(n=64, length=64), collate_fn=H.mlm_collate).fit()
            print("TRAINED")
        except ConfigError as e:
            print("CONFIGERROR", round(time.monotonic() - t0, 1), str(e).split(".")[0])

    run()                                    # the pre-flight
    workers.check_worker_shm = lambda *a, **k: {{}}
    workers.WORKER_TIMEOUT_S = 5.0
    run()                                    # without it: the DataLoader timeout, not a hang
""")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare (mount namespace)")
def test_real_64k_dev_shm_in_a_mount_namespace(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(tests=str(REPO / "tests")))
    cmd = ["unshare", "-m", "sh", "-c",
           f"mount -t tmpfs -o size=64k tmpfs /dev/shm && exec {sys.executable} {script}"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail("training with a 64 KiB /dev/shm hung")
    if res.returncode and "mount" in res.stderr and "CONFIGERROR" not in res.stdout:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()[-200:]}")
    lines = [x for x in res.stdout.splitlines() if x.startswith(("CONFIGERROR", "TRAINED"))]
    assert len(lines) == 2, res.stdout + res.stderr[-3000:]
    assert "shared memory" in lines[0] and "64 KiB free" in lines[0], lines[0]
    assert "stopped delivering batches" in lines[1], lines[1]


def test_step_analysis_loop_checks_shm_too(monkeypatch):
    from transformers import BertConfig, BertForMaskedLM

    from nbkit.profiling.step_timing import StepConfig, step_loop

    model = BertForMaskedLM(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, max_position_embeddings=128))
    monkeypatch.setattr(workers, "shm_free_bytes", lambda *a, **k: 64 * 1024)
    cfg = StepConfig(batch_size=16, seq_len=128, precision="fp32", attn="sdpa", num_workers=2, pin_memory=False,
                     steps=1, warmup=1)
    with pytest.raises(ConfigError, match="num_workers=2.*--shm-size"):
        step_loop(model, cfg, device="cpu")
    cfg.num_workers = 0
    assert len(step_loop(model, cfg, device="cpu").train_data) == 2 * 16
