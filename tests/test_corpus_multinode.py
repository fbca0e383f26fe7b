"""Two torchrun "nodes" on this machine read one prepared store through ``nbkit.jobs.pretrain --corpus``.

Each node is its own ``torchrun --nnodes=2 --nproc-per-node=1`` (c10d rendezvous on 127.0.0.1, gloo,
CPU), as on two hosts. Checked: the ranks train on disjoint blocks; the final weights equal one
process with twice the accumulation (batch 1 per micro-batch, so every micro-batch's masks are
seeded by the same single index under both layouts; dropout 0); a run stopped after 3 steps on two
nodes resumes in one process and reads the rest of the epoch, every block at most once.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import peoples_daily  # noqa: E402
from _store import write_store  # noqa: E402
from nethelpers import free_port, stop_group  # noqa: E402

pytestmark = [pytest.mark.multiproc, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
LOGGED_JOB = Path(__file__).resolve().parent / "block_log_job.py"   # nbkit.jobs.pretrain, each rank's blocks logged
TIMEOUT_S = 300


def _env(tmp: Path) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "NBKIT_RUNS_DIR": str(tmp / "runs"), "NBKIT_SCALE": "smoke",
            "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _job_args(log_dir, store, out, steps, accum) -> list[str]:
    return [str(LOGGED_JOB), str(log_dir), "--scale", "smoke", "--corpus", str(store), "--output-dir", str(out),
            "--max-steps", str(steps), "--batch-size", "1", "--grad-accum-steps", str(accum), "--dropout", "0",
            "--backend", "gloo", "--log-every", "1", "--checkpoint-every", str(steps)]


def two_nodes(tmp, store, out, steps, accum, log_dir):
    """Start two single-process torchrun nodes that rendezvous on a free port; wait for both."""
    port = free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id=nbkit-{port}",
           "--max-restarts=0", *_job_args(log_dir, store, out, steps, accum)]
    nodes = [subprocess.Popen(cmd, cwd=ROOT, env=_env(tmp), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True) for _ in range(2)]
    logs = []
    try:
        for p in nodes:
            logs.append(p.communicate(timeout=TIMEOUT_S)[0])
    except subprocess.TimeoutExpired:
        for p in nodes:
            stop_group(p, timeout=5)
        pytest.fail(f"two-node run did not finish in {TIMEOUT_S} s")
    assert all(p.returncode == 0 for p in nodes), "\n----\n".join(logs)[-6000:]


def one_process(tmp, store, out, steps, accum, log_dir):
    proc = subprocess.run([sys.executable, *_job_args(log_dir, store, out, steps, accum)], cwd=ROOT,
                          env=_env(tmp), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]


def blocks(log_dir: Path, rank: int) -> list[int]:
    lines = (log_dir / f"blocks-rank{rank}.jsonl").read_text().splitlines()
    return [i for line in lines for i in json.loads(line)]


def weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "model" / "model.safetensors"))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return write_store(tmp_path_factory.mktemp("store"), [list(w) for _, w in peoples_daily(60)], shard_tokens=700)


def test_two_nodes_disjoint_blocks_and_same_weights_as_one_process(store, tmp_path):
    import torch

    steps, accum = 5, 2
    two_nodes(tmp_path, store, tmp_path / "ddp", steps, accum, log_dir=tmp_path / "log2")
    one_process(tmp_path, store, tmp_path / "single", steps, 2 * accum, log_dir=tmp_path / "log1")
    r0, r1, single = blocks(tmp_path / "log2", 0), blocks(tmp_path / "log2", 1), blocks(tmp_path / "log1", 0)
    assert len(r0) == len(r1) == steps * accum
    assert not set(r0) & set(r1), "the two nodes trained on the same block"
    assert sorted(r0 + r1) == sorted(single)                    # together: the single process's blocks
    a, b = weights(tmp_path / "ddp"), weights(tmp_path / "single")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=2e-5, msg=f"parameter {k} differs")
    metrics = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["steps"] == steps


def test_two_node_run_resumes_in_one_process_over_the_rest_of_the_epoch(store, tmp_path):
    from nbkit.corpus.dataset import StoreMLMDataset

    n = len(StoreMLMDataset(store, 64))              # the smoke scale's block size
    global_batch = 4                                 # 2 nodes x 1 x accum 2 == 1 process x 1 x accum 4
    two_nodes(tmp_path, store, tmp_path / "run", 3, 2, log_dir=tmp_path / "before")
    one_process(tmp_path, store, tmp_path / "run", n // global_batch, 4, log_dir=tmp_path / "after")
    before = blocks(tmp_path / "before", 0) + blocks(tmp_path / "before", 1)
    after = blocks(tmp_path / "after", 0)
    assert len(before) == 3 * global_batch
    seen = before + after
    assert len(seen) == len(set(seen)), "a block was trained on twice in one epoch"
    assert len(seen) == n // global_batch * global_batch and set(seen) <= set(range(n))
