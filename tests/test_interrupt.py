"""Work survives an interrupt: a Ctrl-C (SIGINT) or SIGTERM while training is held to the step boundary, where the loop
saves a checkpoint and raises TrainingInterrupted saying how to resume (one line in Jupyter); a resume ends where an
uninterrupted run does; checkpoints also come by time (checkpoint_minutes); a job exits 130 with its line (143 after
SIGTERM; an ignored SIGINT is announced at the start with the SIGTERM that stops it), and so
does ``python -m nbkit.jobs.launch`` (torchrun) without torch's traceback; a resume under another number of
processes keeps the global batch by changing grad_accum_steps."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nbkit.train import Loop, TrainConfig, TrainingInterrupted
from nbkit.train import checkpoint as ckpt

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
from loop_helpers import mlm_collate, tiny_mlm, token_data  # noqa: E402


class CtrlC:
    """Loop callback: SIGINT to this process after step ``at`` (what a terminal's or Jupyter's Ctrl-C sends);
    ``sig=signal.SIGTERM``: what ``timeout``, SLURM, Kubernetes and ``docker stop`` send."""

    def __init__(self, at: int, sig=signal.SIGINT):
        self.at, self.sig = at, sig

    def on_step_end(self, loop):
        if loop.state.step == self.at:
            os.kill(os.getpid(), self.sig)


def _loop(out, callbacks=(), **kw):
    cfg = TrainConfig(**{**dict(max_steps=8, batch_size=4, grad_accum_steps=2, log_every=2, lr=2e-3,
                                output_dir=out, progress=False, progress_every_s=None), **kw})
    return Loop(tiny_mlm(), cfg, token_data(24), collate_fn=mlm_collate, callbacks=list(callbacks), device="cpu")


def test_ctrl_c_saves_at_the_step_boundary_and_the_resume_ends_as_an_uninterrupted_run(tmp_path, capsys):
    whole = _loop(tmp_path / "whole")
    whole.fit()
    loop = _loop(tmp_path / "run", [CtrlC(at=3)])
    with pytest.raises(TrainingInterrupted) as info:
        loop.fit()
    # the signal came after step 3's one all-reduce: step 4 finishes, then the checkpoint, then the stop
    assert [c.step for c in ckpt.list_checkpoints(tmp_path / "run")] == [4]
    msg = str(info.value)
    assert f"stopped at step 4 of 8; checkpoint saved: {tmp_path / 'run' / 'checkpoints' / 'step-000004'}" in msg
    assert "Run the same cell or command again to resume" in msg
    assert info.value._render_traceback_() == [f"TrainingInterrupted: {msg}"]    # what Jupyter shows: one line
    assert isinstance(info.value, KeyboardInterrupt) and info.value.nbkit_stopped["step"] == 4
    assert "Ctrl-C: stopping after this step" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the handler is put back"
    assert [h["step"] for h in ckpt.load_latest(tmp_path / "run").load_state()["history"]] == [2, 4]
    again = _loop(tmp_path / "run")
    assert again.fit().metrics["steps"] == 8
    for (name, a), b in zip(whole.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name                 # exact resume: the same weights


def test_sigterm_saves_at_the_step_boundary_like_ctrl_c_and_names_itself(tmp_path, capsys):
    loop = _loop(tmp_path / "run", [CtrlC(at=3, sig=signal.SIGTERM)])
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingInterrupted) as info:
        loop.fit()
    assert [c.step for c in ckpt.list_checkpoints(tmp_path / "run")] == [4]
    msg = str(info.value)
    assert msg.startswith(f"SIGTERM: stopped at step 4 of 8; checkpoint saved: "
                          f"{tmp_path / 'run' / 'checkpoints' / 'step-000004'} (")
    assert re.search(r"\(\d+\.\d s after the signal\)\. Run the same cell or command again", msg), msg
    assert info.value.nbkit_stopped["signal"] == "SIGTERM" and info.value.nbkit_stopped["step"] == 4
    assert "SIGTERM: stopping after this step and saving a checkpoint" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGTERM) is before, "the handler is put back"
    assert _loop(tmp_path / "run").fit().metrics["steps"] == 8


def test_an_ignored_sigint_is_announced_with_the_sigterm_that_stops_the_run(capsys):
    from nbkit.train.loop import _HeldInterrupt

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _HeldInterrupt():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        out = capsys.readouterr().out
        assert "SIGINT is ignored in this process" in out and f"`kill {os.getpid()}` (SIGTERM) stops it" in out
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with _HeldInterrupt():                      # SIGINT handled: nothing to announce
            pass
        assert capsys.readouterr().out == ""
    finally:
        signal.signal(signal.SIGINT, previous)


def test_without_an_output_dir_the_interrupt_says_nothing_was_saved(capsys):
    cfg = TrainConfig(max_steps=6, batch_size=4, progress=False, progress_every_s=None)
    loop = Loop(tiny_mlm(), cfg, token_data(16), collate_fn=mlm_collate, callbacks=[CtrlC(at=1)], device="cpu")
    with pytest.raises(TrainingInterrupted, match=r"stopped at step 2 of 6; nothing saved \(no output_dir\)"):
        loop.fit()


def test_a_second_ctrl_c_a_second_later_stops_at_once_and_a_duplicate_does_not():
    from nbkit.train.loop import _HeldInterrupt

    with _HeldInterrupt(announce=False) as held:
        assert signal.getsignal(signal.SIGINT) == held._handle
        held._handle(signal.SIGINT, None)
        assert held.requested
        held._handle(signal.SIGINT, None)          # the same Ctrl-C delivered twice: still held
        held.t -= 1.5
        with pytest.raises(KeyboardInterrupt):
            held._handle(signal.SIGINT, None)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _HeldInterrupt() as held:             # an ignored SIGINT (nohup, a background job) stays ignored
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_checkpoint_minutes_saves_by_time_whatever_the_step_interval(tmp_path):
    class Slow:
        def on_step_end(self, loop):
            time.sleep(0.25)

    loop = _loop(tmp_path, [Slow()], max_steps=6, checkpoint_minutes=0.5 / 60, keep_last=0)   # every 0.5 s
    loop.fit()
    steps = [c.step for c in ckpt.list_checkpoints(tmp_path)]
    assert len(steps) >= 2 and steps[0] < 6 and steps[-1] == 6, steps   # by time (~every 3rd step here), the last
    untimed = _loop(tmp_path / "off", [Slow()], max_steps=6, checkpoint_minutes=None, keep_last=0)
    untimed.fit()
    assert [c.step for c in ckpt.list_checkpoints(tmp_path / "off")] == [6]
    with pytest.raises(Exception, match="checkpoint_minutes=0 must be > 0"):
        TrainConfig(max_steps=1, batch_size=1, checkpoint_minutes=0)


def test_the_global_batch_rule_for_another_world_size():
    state = {"world_size": 2, "config": {"batch_size": 16, "grad_accum_steps": 1}}
    assert ckpt.keep_global_batch(state, 16, 1, 1) == (
        2, "grad_accum_steps 1 -> 2 keeps the global batch at 32 (16 x 2 x 1 processes; the checkpoint's: "
           "16 x 1 x 2)", True)
    accum, note, kept = ckpt.keep_global_batch({**state, "world_size": 4}, 16, 1, 3)    # 64 over 3 processes
    assert (accum, kept) == (1, False) and "from 64 to 48" in note and "x 3 = 64" in note
    one = {"world_size": 1, "config": {"batch_size": 16, "grad_accum_steps": 2}}       # 32 = 16 x 2 x 1
    assert ckpt.keep_global_batch(one, 16, 2, 2)[:2] == (1, "grad_accum_steps 2 -> 1 keeps the global batch at 32 "
                                                             "(16 x 1 x 2 processes; the checkpoint's: 16 x 2 x 1)")
    assert ckpt.keep_global_batch(state, 16, 1, 2) == (1, None, True)      # same world size: nothing to do
    assert ckpt.keep_global_batch(state, 8, 1, 1) == (1, None, True)       # batch_size changed on purpose: kept


def _job_env(tmp_path):
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1", "NBKIT_RUNS_DIR": str(tmp_path / "runs"),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _interrupt_when_training(cmd, env, timeout=600, sig=signal.SIGINT, preexec_fn=None,
                             group: bool = False) -> tuple[int, str]:
    """Run ``cmd``; send ``sig`` to its process (``group``: to its process group, every worker too, as SLURM's
    ``scancel`` does) once a second progress line appeared; ``(exit code, output)``."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True, preexec_fn=preexec_fn)
    out, sent, deadline = [], False, time.monotonic() + timeout
    for line in proc.stdout:
        out.append(line)
        if not sent and re.match(r"train step ([2-9]|\d\d+)/", line):
            os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)
            sent = True
        assert time.monotonic() < deadline, "".join(out[-30:])
    return proc.wait(timeout=120), "".join(out)


STEPS = 60   # the Ctrl-C comes at step 2 or 3 (the second progress line, 0.2 s apart): the run is far from its end
JOB = ["-m", "nbkit.jobs.pretrain", "--scale", "smoke", "--max-steps", str(STEPS), "--report-to", "none",
       "--progress-every-s", "0.2", "--eval-every", "20"]


@pytest.mark.slow
def test_a_job_interrupted_by_ctrl_c_exits_130_with_one_line_and_resumes_to_the_same_end(tmp_path):
    out, env = tmp_path / "mlm", _job_env(tmp_path)
    rc, log = _interrupt_when_training([sys.executable, *JOB, "--output-dir", str(out)], env)
    stopped = ckpt.load_latest(out)
    assert rc == 130 and stopped is not None and 0 < stopped.step < STEPS, log[-3000:]
    line = next(ln for ln in log.splitlines() if ln.startswith("nbkit.jobs.pretrain: interrupted"))
    assert f"at step {stopped.step} of {STEPS}; newest complete checkpoint: {stopped.path}" in line
    assert "Run the same command again to resume" in line and "Traceback" not in log
    done = subprocess.run([sys.executable, *JOB, "--output-dir", str(out)], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"resumed from {stopped.path} (step {stopped.step}" in done.stdout
    import json

    assert json.loads((out / "metrics.json").read_text())["steps"] == STEPS


def _ignore_sigint():
    """What a shell does for a job a script starts in the background (``cmd &``): SIGINT inherited as ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
def test_a_background_job_says_sigint_is_ignored_and_sigterm_stops_it_with_143_and_a_checkpoint(tmp_path):
    out, env = tmp_path / "mlm", _job_env(tmp_path)
    rc, log = _interrupt_when_training([sys.executable, *JOB, "--output-dir", str(out)], env, sig=signal.SIGTERM,
                                       preexec_fn=_ignore_sigint)
    stopped = ckpt.load_latest(out)
    assert rc == 143 and stopped is not None and 0 < stopped.step < STEPS, log[-3000:]
    assert "SIGINT is ignored in this process" in log and "(SIGTERM) stops it after the running step" in log
    assert "SIGTERM: stopping after this step and saving a checkpoint" in log
    line = next(ln for ln in log.splitlines() if ln.startswith("nbkit.jobs.pretrain: stopped by SIGTERM"))
    assert f"at step {stopped.step} of {STEPS}; newest complete checkpoint: {stopped.path}" in line
    assert "Traceback" not in log
    took = re.search(rf"\(step {stopped.step}, (\d+\.\d) s after the signal\)", line)
    assert took and float(took.group(1)) < 10, log[-3000:]   # inside the shortest grace docs name: docker stop's 10 s


@pytest.mark.multiproc
@pytest.mark.slow
def test_torchrun_ctrl_c_exits_130_and_one_process_resumes_with_the_same_global_batch(tmp_path):
    import json

    out, env = tmp_path / "mlm", _job_env(tmp_path)
    launcher = [sys.executable, "-m", "nbkit.jobs.launch", "--standalone", "--nproc-per-node=2"]
    rc, log = _interrupt_when_training([*launcher, *JOB, "--output-dir", str(out)], env)
    stopped = ckpt.load_latest(out)
    assert rc == 130 and stopped is not None, log[-3000:]
    assert "SignalException" not in log and "Traceback" not in log and "death signal" not in log, log[-3000:]
    assert sum(ln.startswith("nbkit.jobs.pretrain: interrupted") for ln in log.splitlines()) == 1   # rank 0 only
    state = stopped.load_state()
    assert state["world_size"] == 2 and state["config"]["grad_accum_steps"] == 1
    done = subprocess.run([sys.executable, *JOB, "--output-dir", str(out)], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert ("written by 2 processes, resumed under 1); grad_accum_steps 1 -> 2 keeps the global batch at 32"
            in done.stdout), done.stdout[-2000:]
    assert "global batch 32 -> 16" not in done.stdout + done.stderr     # no "changed settings" warning for it
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == STEPS and metrics["grad_accum_steps"] == 2 and metrics["world_size"] == 1


@pytest.mark.multiproc
@pytest.mark.slow
@pytest.mark.parametrize("to", ["launcher", "group"])
def test_torchrun_sigterm_exits_143_with_a_complete_checkpoint_and_the_rerun_resumes_from_it(tmp_path, to):
    """SIGTERM to torchrun (``launcher``: what Kubernetes and ``docker stop`` send to the container's first process)
    or to every process of the job (``group``: SLURM's ``scancel``, the time limit): the workers end the running
    step, save one complete checkpoint and the job exits 143 with one line; the same command resumes from it."""
    import json

    out, env = tmp_path / "mlm", _job_env(tmp_path)
    launcher = [sys.executable, "-m", "nbkit.jobs.launch", "--standalone", "--nproc-per-node=2"]
    rc, log = _interrupt_when_training([*launcher, *JOB, "--output-dir", str(out)], env, sig=signal.SIGTERM,
                                       group=to == "group")
    stopped = ckpt.load_latest(out)                                     # complete ones only
    assert rc == 143 and stopped is not None and 0 < stopped.step < STEPS, log[-3000:]
    assert "Traceback" not in log and "SignalException" not in log, log[-3000:]
    lines = [ln for ln in log.splitlines() if ln.startswith("nbkit.jobs.pretrain: stopped by SIGTERM")]
    assert len(lines) == 1, log[-3000:]                                 # rank 0 only
    assert f"at step {stopped.step} of {STEPS}; newest complete checkpoint: {stopped.path}" in lines[0]
    state = stopped.load_state()
    assert state["world_size"] == 2 and state["step"] == stopped.step and len(state["rng_per_rank"]) == 2
    done = subprocess.run([*launcher, *JOB, "--output-dir", str(out)], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"resumed from {stopped.path} (step {stopped.step}" in done.stdout, done.stdout[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == STEPS and metrics["world_size"] == 2


@pytest.mark.slow
def test_in_a_jupyter_kernel_the_interrupt_is_one_line_and_the_checkpoint_is_there(tmp_path):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from test_interrupt import CtrlC, _loop\n"
        f"loop = _loop({str(tmp_path / 'run')!r}, [CtrlC(at=2)])"),
        nbformat.v4.new_code_cell("result = loop.fit()"), nbformat.v4.new_code_cell("print('not reached')")]
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    with pytest.raises(CellExecutionError) as info:      # papermill stops here too: the cell raised
        client.execute()
    assert info.value.ename == "TrainingInterrupted"
    error = next(o for o in nb.cells[1].outputs if o.output_type == "error")
    assert len(error.traceback) == 1 and error.traceback[0].startswith("TrainingInterrupted: Ctrl-C: stopped at step 3")
    assert "Run the same cell or command again to resume" in error.traceback[0]
    assert not nb.cells[2].outputs
    assert [c.step for c in ckpt.list_checkpoints(tmp_path / "run")] == [3]
