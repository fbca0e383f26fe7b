"""The real training loop under torchrun: 2 gloo processes on CPU against one process.

Global batch 16 sequences per optimizer step in both: 2 ranks x batch 4 x accumulation 2
against 1 process x batch 8 x accumulation 2 (see tests/ddp_loop_job.py). 40 examples,
so step 3 crosses an epoch boundary.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from ddp_loop_job import run

JOB = str(Path(__file__).with_name("ddp_loop_job.py"))
pytestmark = pytest.mark.multiproc


def launch_two(out, *args):
    """2 processes through nbkit.jobs.launch (gloo on CPU); returns the streamed metrics dicts."""
    from nbkit.jobs.launch import launch

    seen = []
    job = launch(JOB, nproc_per_node=2, args=[str(out), "--batch-size", "4", *args], device="cpu",
                 on_metrics=seen.append, show=False, env={"OMP_NUM_THREADS": "1"})
    rc = job.wait()
    assert rc == 0, "\n".join(job.lines)
    return seen


def assert_same_params(a_dir, b_dir):
    a, b = torch.load(Path(a_dir) / "params.pt"), torch.load(Path(b_dir) / "params.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=2e-5, msg=f"parameter {k} differs")


def losses(d):
    return [(h["step"], h["loss"]) for h in json.loads(Path(d, "history.json").read_text()) if "loss" in h]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    run(out, batch_size=8)
    return out


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    return out, launch_two(out)


def test_two_ranks_match_one_process_on_the_same_global_batch(single, ddp):
    out, metrics = ddp
    assert_same_params(out, single)
    for (s1, l1), (s2, l2) in zip(losses(out), losses(single), strict=True):
        assert s1 == s2 and l1 == pytest.approx(l2, rel=1e-4)
    # metrics came back through the launcher, from rank 0 only: one line per step, plus evals
    steps = [m["step"] for m in metrics if "loss" in m]
    assert steps == [1, 2, 3, 4]
    ddp_eval = [m for m in metrics if "eval_loss" in m][-1]
    ref_eval = [h for h in json.loads(Path(single, "history.json").read_text()) if "eval_loss" in h][-1]
    assert ddp_eval["eval_tokens"] == ref_eval["eval_tokens"]               # sharded eval saw every batch
    assert ddp_eval["eval_loss"] == pytest.approx(ref_eval["eval_loss"], rel=1e-4)
    assert all(m["tokens_per_s"] > 0 for m in metrics if "loss" in m)


def test_ddp_checkpoint_resumes_in_one_process(single, ddp, tmp_path):
    src, _ = ddp
    shutil.copytree(Path(src) / "checkpoints" / "step-000002", tmp_path / "checkpoints" / "step-000002")
    state = torch.load(tmp_path / "checkpoints" / "step-000002" / "trainer_state.pt", weights_only=False)
    assert state["world_size"] == 2 and len(state["rng_per_rank"]) == 2
    loop, _ = run(tmp_path, batch_size=8, resume=True)
    assert loop.state.step == 4
    assert_same_params(tmp_path, single)


def test_one_process_checkpoint_resumes_under_two_ranks(single, tmp_path):
    run(tmp_path, batch_size=8, stop_at=2)       # interrupted after the step-2 checkpoint
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000002"]
    metrics = launch_two(tmp_path, "--resume")
    assert [m["step"] for m in metrics if "loss" in m] == [3, 4]
    assert_same_params(tmp_path, single)
