"""nbkit.train.ddp.launcher_watch: a worker whose launcher died (kill -9) stops within seconds.

The first tests use a plain Python "launcher" that starts one watched worker (no torch: fast);
the last one kills a real torchrun running the real Loop on 2 gloo ranks."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from nbkit.train.ddp import launcher_watch as W

ROOT = Path(__file__).resolve().parents[1]


def test_watch_calls_on_gone_once_when_the_parent_pid_changes():
    ppids = iter([100, 100, 100, 1, 1, 1])
    calls = []
    w = W.LauncherWatch(interval_s=0.01, getppid=lambda: next(ppids), on_gone=lambda: calls.append(1))
    w.start()
    w.join(timeout=5)
    assert not w.is_alive() and w.gone.is_set() and calls == [1]


def test_watch_runs_only_in_processes_a_launcher_started():
    assert not W.launched_worker({})                                         # a kernel, a plain python
    assert W.launched_worker({"TORCHELASTIC_RUN_ID": "x"})                   # torchrun, any world size
    assert not W.launched_worker({"TORCHELASTIC_RUN_ID": "x", W.ENV: "0"})   # switched off
    assert W.launched_worker({"NBKIT_DISTRIBUTED": "1", "WORLD_SIZE": "2"})  # srun, mpirun
    assert not W.launched_worker({"NBKIT_DISTRIBUTED": "1", "WORLD_SIZE": "1"})
    assert W.watch_launcher(env={}) is None


WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from nbkit.train.ddp.launcher_watch import watch_launcher
    out, stubborn = Path(sys.argv[1]), sys.argv[2] == "stubborn"
    # clean: a grace far past any scheduling delay, so leaving before it proves the interrupt ended it;
    # stubborn: 4 s, so the os._exit after it comes soon (only its lower bound is a time the test checks)
    watch_launcher(interval_s=0.1, grace_s=4.0 if stubborn else 90.0)
    out.joinpath("started").write_text("")
    while True:
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            out.joinpath("interrupted").write_text("")
            if not stubborn:
                raise SystemExit(130)
""")
LAUNCHER = textwrap.dedent("""
    import subprocess, sys, time
    w = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]], start_new_session=True)
    print(w.pid, flush=True)
    time.sleep(600)
""")


def start_family(tmp_path, mode, sigint_ignored=False):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHELASTIC_RUN_ID": "test"}
    import signal

    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None   # as `cmd &` does
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, WORKER, str(tmp_path), mode], env=env,
                                stdout=subprocess.PIPE, text=True, preexec_fn=ignore)
    worker = psutil.Process(int(launcher.stdout.readline()))
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and worker.is_running(), "the worker did not start"
        time.sleep(0.05)
    return launcher, worker


def gone_within(proc: psutil.Process, seconds: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return time.monotonic() - t0
        except psutil.NoSuchProcess:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


@pytest.mark.parametrize("mode, sigint_ignored", [("clean", False), ("stubborn", False), ("clean", True)],
                         ids=["clean", "stubborn", "started-in-the-background"])
def test_worker_stops_when_its_launcher_is_killed(tmp_path, mode, sigint_ignored):
    """Also when started from a background shell (`torchrun ... &`: SIGINT inherited as ignored), where the
    interrupt did nothing and the worker died by os._exit after the grace period, without its clean stop."""
    launcher, worker = start_family(tmp_path, mode, sigint_ignored)
    try:
        launcher.kill()                   # SIGKILL: the launcher cannot stop its worker
        launcher.wait()
        took = gone_within(worker, 120)
        assert took is not None, "the worker outlived its launcher"
        assert (tmp_path / "interrupted").exists()   # the main thread got a KeyboardInterrupt first
        if mode == "clean":
            assert took < 90.0, took                  # it left on the interrupt, before the grace period's os._exit
        else:
            assert took >= 3.5, took                  # it ignored the interrupt: os._exit after grace_s (4 s)
    finally:
        with __import__("contextlib").suppress(psutil.Error):
            worker.kill()


@pytest.mark.multiproc
@pytest.mark.slow
def test_kill_9_of_torchrun_stops_both_workers_and_leaves_no_partial_checkpoint(tmp_path):
    from nbkit.jobs import launch as L

    job = str(Path(__file__).with_name("ddp_loop_job.py"))
    out = tmp_path / "run"
    h = L.launch(job, nproc_per_node=2, device="cpu", show=False, env={"OMP_NUM_THREADS": "1"},
                 args=[str(out), "--batch-size", "4", "--steps", "100000", "--step-sleep", "0.05"])
    try:
        deadline = time.monotonic() + 120
        while len(h.metrics) < 3 and time.monotonic() < deadline:   # a few steps (and checkpoints) in
            assert h.poll() is None, "\n".join(h.lines)
            time.sleep(0.1)
        assert h.metrics, "no metrics line arrived"
        workers = [psutil.Process(p) for p in h._descendants()]   # torchrun's children: the 2 ranks
        assert len(workers) == 2
        os.kill(h.proc.pid, signal.SIGKILL)               # torchrun's agent dies without a word
        h.proc.wait()
        t0 = time.monotonic()
        left = [w for w in workers if gone_within(w, max(0.0, 120 - (time.monotonic() - t0))) is None]
        assert not left, f"workers {[w.pid for w in left]} outlived torchrun"
        assert not (out / "params.pt").exists()           # they did not train to the end
        ckpts = out / "checkpoints"
        assert [p.name for p in ckpts.iterdir() if not p.name.startswith("step-") or ".tmp" in p.name] == []
    finally:
        h.terminate(grace_s=2)
