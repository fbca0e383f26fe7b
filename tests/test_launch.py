"""nbkit.jobs.launch end to end with the real loop: the pretraining job and a tiny-BERT Loop
job (tests/ddp_loop_job.py) under torchrun, 2 gloo processes on CPU. That two ranks train
exactly like one process on the same global batch is tests/test_ddp_loop.py's part."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from nbkit.errors import ConfigError
from nbkit.jobs import launch as L
from nbkit.jobs.launch import parse_metrics_line

LOOP_JOB = str(Path(__file__).with_name("ddp_loop_job.py"))  # the real Loop on a tiny BERT MLM
ENV = {"OMP_NUM_THREADS": "1"}


def long_loop_job(out):
    """Arguments of a Loop job that runs until stopped (0.05 s sleep per step)."""
    return [str(out), "--batch-size", "4", "--steps", "100000", "--step-sleep", "0.05"]


def no_process_left(handle):
    """None of the recorded PIDs, nor anything in torchrun's process group, is still running."""
    assert not handle.alive_pids()
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == handle.proc.pid and p.info["status"] != psutil.STATUS_ZOMBIE:
                pytest.fail(f"process {p.pid} of the launched group survived")
        except (ProcessLookupError, psutil.Error):
            pass


@pytest.mark.multiproc
@pytest.mark.slow
def test_pretrain_job_under_two_gloo_ranks_and_its_checkpoint_resumes_in_one_process(tmp_path, runs_tmp, capsys):
    from nbkit.jobs import pretrain

    out = tmp_path / "mlm"
    args = ["--scale", "smoke", "--max-steps", "2", "--log-every", "1", "--checkpoint-every", "2",
            "--resume", "none", "--output-dir", str(out)]
    got = []
    h = L.launch("nbkit.jobs.pretrain", nproc_per_node=2, args=args, on_metrics=got.append,
                 log_dir=tmp_path / "logs", device="cpu", show=False,
                 env={**ENV, "NBKIT_RUNS_DIR": str(runs_tmp)})
    assert h.wait(timeout=300) == 0, "\n".join(h.lines[-30:])
    assert [m["step"] for m in got if "loss" in m] == [1, 2]       # rank 0 only: one line per step
    assert [m["step"] for m in got if "eval_loss" in m] == [2]
    assert h.metrics == got and "NBKIT_METRICS" in next((tmp_path / "logs").iterdir()).read_text()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["steps"] == 2
    state = torch.load(out / "checkpoints" / "step-000002" / "trainer_state.pt", weights_only=False)
    assert state["world_size"] == 2 and len(state["rng_per_rank"]) == 2
    capsys.readouterr()
    # the same job in this process continues the 2-rank checkpoint (the loop's own resume)
    assert pretrain.main([*args[:2], "--max-steps", "3", "--log-every", "1", "--resume", "auto",
                          "--output-dir", str(out)]) == 0
    stdout = capsys.readouterr().out
    lines = [m for m in map(parse_metrics_line, stdout.splitlines()) if m]
    assert [m["step"] for m in lines if "loss" in m] == [3]
    assert "(step 2, written by 2 processes, resumed under 1)" in stdout
    assert json.loads((out / "metrics.json").read_text())["world_size"] == 1


@pytest.mark.multiproc
@pytest.mark.slow
def test_interrupt_terminates_torchrun_and_its_workers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as in a notebook: workers still import nbkit (PYTHONPATH)

    def interrupt_on_first_metrics(m):
        raise KeyboardInterrupt  # what "interrupt kernel" raises in the cell running wait()

    h = L.launch(LOOP_JOB, nproc_per_node=2, device="cpu", show=False, env=ENV,
                 on_metrics=interrupt_on_first_metrics, args=long_loop_job(tmp_path / "run"))
    with pytest.raises(KeyboardInterrupt):
        h.wait(timeout=120)
    assert len(h.pids) >= 3  # torchrun + 2 workers were seen
    assert h.returncode is not None
    no_process_left(h)


@pytest.mark.multiproc
@pytest.mark.slow
def test_a_kernel_interrupt_lets_the_workers_checkpoint_and_the_job_exits_130(tmp_path):
    from nbkit.train.checkpoint import list_checkpoints

    seen = []

    def interrupt_once(m):
        seen.append(m)
        if len(seen) == 3:
            raise KeyboardInterrupt   # "interrupt kernel" once, during wait()

    h = L.launch(LOOP_JOB, nproc_per_node=2, device="cpu", show=False, env=ENV, on_metrics=interrupt_once,
                 args=[*long_loop_job(tmp_path / "run"), "--ckpt-every", "100000"])
    with pytest.raises(KeyboardInterrupt):
        h.wait(timeout=180)
    assert h.returncode == 130, "\n".join(h.lines)        # python -m nbkit.jobs.launch: 128 + SIGINT
    saved = list_checkpoints(tmp_path / "run")
    assert saved and saved[-1].step >= 3, "the workers saved at the step boundary, not by steps"
    assert not any("SignalException" in ln for ln in h.lines)
    no_process_left(h)


@pytest.mark.multiproc
@pytest.mark.slow
def test_terminate_stops_a_running_job(tmp_path):
    h = L.launch(LOOP_JOB, nproc_per_node=2, device="cpu", show=False, env=ENV,
                 args=long_loop_job(tmp_path / "run"))
    deadline = time.monotonic() + 120
    while not h.metrics and time.monotonic() < deadline:
        assert h.poll() is None, "\n".join(h.lines)
        time.sleep(0.1)
    assert h.metrics, "no metrics line arrived"
    assert h.metrics[0]["step"] == 1 and "loss" in h.metrics[0]  # the loop's own log dict
    h.terminate(grace_s=5)
    no_process_left(h)


def test_too_many_gpus_names_both_numbers_and_the_cpu_way(monkeypatch):
    monkeypatch.setattr(L, "visible_gpus", lambda: 1)
    with pytest.raises(ConfigError) as e:
        L.launch("nbkit.jobs.pretrain", nproc_per_node=4, device="cuda", show=False)
    msg = str(e.value)
    assert "nproc_per_node=4" in msg and "only 1 GPU" in msg
    assert "gloo" in msg and "device='cpu'" in msg and "CUDA_VISIBLE_DEVICES" in msg


def test_missing_torchrun_is_a_config_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch.distributed.run" else real(name, *a))
    with pytest.raises(ConfigError, match="pip install torch"):
        L.launch("nbkit.jobs.pretrain", nproc_per_node=1, device="cpu", show=False)


def test_build_command_forms(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    head = [sys.executable, "-m", "nbkit.jobs.launch", "--standalone", "--nproc-per-node=2"]
    assert L.build_command(str(script), 2, ["--x", 1]) == [*head, str(script), "--x", "1"]
    assert L.build_command("nbkit.jobs.pretrain", 2) == [*head, "-m", "nbkit.jobs.pretrain"]
    assert L.build_command(psutil.cpu_count, 2)[-2:] == ["nbkit.jobs.call", "psutil:cpu_count"]
    multi = L.build_command("m", 8, torchrun_args=["--nnodes=2", "--rdzv-endpoint=h:1"])
    assert "--standalone" not in multi and "--nnodes=2" in multi
    with pytest.raises(ConfigError, match="move it into a .py file"):
        L.build_command(lambda: None, 1)
    with pytest.raises(ConfigError):
        L.build_command("m", 0)


def test_metrics_protocol_and_sinks():
    assert L.parse_metrics_line('[rank0]:NBKIT_METRICS {"step": 3}') == {"step": 3}
    assert L.parse_metrics_line("NBKIT_METRICS {broken") is None
    assert L.parse_metrics_line("loss 3.2") is None

    class Plot:
        def __init__(self):
            self.seen = []

        def update(self, logs):
            self.seen.append(logs)

    class Callback:
        def __init__(self):
            self.seen = []

        def on_log(self, loop, logs):
            self.seen.append((loop, logs))

    p, c, plain = Plot(), Callback(), []
    for sink in (p, c, plain.append):
        L._metrics_sink(sink)({"step": 1})
    assert p.seen == [{"step": 1}] and c.seen == [(None, {"step": 1})] and plain == [{"step": 1}]
    with pytest.raises(ConfigError):
        L._metrics_sink(42)


def test_function_runner_calls_module_function(capsys):
    from nbkit.jobs import call

    assert call.main(["builtins:print", "hello", "rank"]) == 0
    assert capsys.readouterr().out == "hello rank\n"
    assert call.main(["nbkit.nowhere:fn"]) == 2
    assert call.main(["no-colon"]) == 2


def test_emit_metrics_roundtrip_and_printer_callback(capsys):
    import numpy as np

    L.emit_metrics({"loss": torch.tensor(2.5), "lr": np.float32(0.5), "device": "cpu"})
    L.MetricsPrinter().on_log(None, {"step": 7})
    lines = capsys.readouterr().out.splitlines()
    assert [L.parse_metrics_line(x) for x in lines] == [{"loss": 2.5, "lr": 0.5, "device": "cpu"}, {"step": 7}]


def test_job_scripts_reject_a_resume_path_and_name_the_accepted_values(tmp_path, capsys):
    from nbkit.jobs import finetune, pretrain
    from nbkit.jobs.common import config_of
    from nbkit.recipes.pretraining import PretrainConfig

    for flag, want in (("auto", True), ("none", False), ("yes", True), ("no", False)):
        assert config_of(PretrainConfig, pretrain.parser().parse_args(["--resume", flag])).resume is want
    for main in (pretrain.main, finetune.main):  # the jobs: that message once, exit code 2 (nbkit.jobs.outcome)
        assert main(["--scale", "smoke", "--output-dir", str(tmp_path), "--resume", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert re.search(r"error: resume='.*': expected True or False", err) and "Traceback" not in err


def test_live_plot_takes_the_launchers_dicts_and_eval_lines_carry_the_step(capsys):
    from types import SimpleNamespace

    from nbkit.views.plots import LivePlot

    L.MetricsPrinter().on_evaluate(SimpleNamespace(state=SimpleNamespace(step=5)), {"eval_loss": 2.0})
    plot = LivePlot(mode="none")
    sink = L._metrics_sink(plot)
    for line in ['NBKIT_METRICS {"step": 4, "loss": 3.0}', *capsys.readouterr().out.splitlines()]:
        sink(L.parse_metrics_line(line))
    assert plot.series["loss"].x == [4] and plot.series["eval_loss"].x == [5] and plot.step == 5


@pytest.mark.multiproc
@pytest.mark.slow
def test_finetune_job_under_two_gloo_ranks_with_mean_pooling_counts_epochs_globally(tmp_path, runs_tmp):
    """The default classifier (mean pooling) leaves BERT's pooler unused: DDP stopped at it in step 2
    ("parameters that were not used in producing loss"); and --epochs counts passes at the global batch."""
    out = tmp_path / "cls"
    args = ["--scale", "smoke", "--epochs", "0.25", "--batch-size", "8", "--log-every", "1",
            "--checkpoint-every", "0", "--resume", "none", "--output-dir", str(out)]
    h = L.launch("nbkit.jobs.finetune", nproc_per_node=2, args=args, device="cpu", show=False,
                 env={**ENV, "NBKIT_RUNS_DIR": str(runs_tmp)})
    assert h.wait(timeout=300) == 0, "\n".join(h.lines[-30:])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pooling"] == "mean" and metrics["world_size"] == 2     # chosen for random weights
    assert metrics["train"]["steps"] == -(-metrics["n_train"] * 0.25 // (8 * 2))   # per process it was twice that
