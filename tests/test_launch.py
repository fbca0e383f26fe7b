"""nbkit.train.launch and DDP end to end: 2 gloo processes under torchrun on CPU vs one process."""
from __future__ import annotations

import json
import os
import sys
import time

import psutil
import pytest
import torch

from nbkit.errors import ConfigError
from nbkit.jobs.common import checkpoint_name
from nbkit.train import launch as L

# Per rank: batch 4 x accumulation 2; with 2 ranks the global batch is 16 sequences,
# which the single-process reference gets as batch 8 x accumulation 2.
STEPS, CKPT_AT = 4, 2
DDP_ARGS = ["--synthetic", "--batch-size", "4", "--grad-accum", "2", "--checkpoint-every", str(CKPT_AT)]


def synthetic_args(out, *, steps=STEPS, resume="none", extra=()):
    return [*DDP_ARGS, "--max-steps", str(steps), "--output-dir", str(out), "--resume", str(resume), *extra]


def run_single(out, steps=STEPS, resume=None):
    """The same job in this process, world size 1, batch 8 (= 2 ranks x 4)."""
    from nbkit.jobs.synthetic import run_synthetic

    return run_synthetic(out, max_steps=steps, batch_size=8, grad_accum=2, checkpoint_every=CKPT_AT,
                         resume=resume)


def assert_same_params(a_dir, b_dir, atol=1e-6):
    a, b = torch.load(a_dir / "final.pt"), torch.load(b_dir / "final.pt")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=1e-5, msg=f"parameter {k} differs")


@pytest.fixture(scope="module")
def single_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    run_single(out)
    return out


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
def test_two_gloo_ranks_match_one_process_and_checkpoint_moves_to_one(tmp_path, single_run):
    got = []
    h = L.launch("nbkit.jobs.pretrain", nproc_per_node=2, args=synthetic_args(tmp_path / "ddp"),
                 on_metrics=got.append, log_dir=tmp_path / "logs", device="cpu", show=False)
    assert h.wait(timeout=120) == 0
    assert [m["step"] for m in got] == list(range(1, STEPS + 1))  # rank 0 only: one line per step
    assert all(m["world_size"] == 2 and m["samples"] == 16 for m in got)
    assert h.metrics == got and "NBKIT_METRICS" in next((tmp_path / "logs").iterdir()).read_text()
    assert_same_params(tmp_path / "ddp", single_run)
    # the label-token normalisation spans ranks: losses equal the single-process ones
    ref = json.loads((single_run / "metrics.json").read_text())
    assert got[-1]["loss"] == pytest.approx(ref["loss"], rel=1e-5)
    # the DDP checkpoint resumes in one process and lands on the same parameters
    run_single(tmp_path / "resumed", resume=tmp_path / "ddp" / checkpoint_name(CKPT_AT))
    assert_same_params(tmp_path / "resumed", single_run)


@pytest.mark.multiproc
@pytest.mark.slow
def test_single_process_checkpoint_resumes_under_two_gloo_ranks(tmp_path, single_run):
    ckpt = single_run / checkpoint_name(CKPT_AT)
    h = L.launch("nbkit.jobs.pretrain", nproc_per_node=2, device="cpu", show=False, log_dir=tmp_path / "logs",
                 args=synthetic_args(tmp_path / "ddp", resume=ckpt))
    assert h.wait(timeout=120) == 0
    assert [m["step"] for m in h.metrics] == list(range(CKPT_AT + 1, STEPS + 1))
    assert_same_params(tmp_path / "ddp", single_run)


@pytest.mark.multiproc
@pytest.mark.slow
def test_interrupt_terminates_torchrun_and_its_workers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as in a notebook: workers still import nbkit (PYTHONPATH)

    def interrupt_on_first_metrics(m):
        raise KeyboardInterrupt  # what "interrupt kernel" raises in the cell running wait()

    h = L.launch("nbkit.jobs.pretrain", nproc_per_node=2, device="cpu", show=False,
                 on_metrics=interrupt_on_first_metrics,
                 args=synthetic_args(tmp_path, steps=100000, extra=("--step-sleep", "0.05")))
    with pytest.raises(KeyboardInterrupt):
        h.wait(timeout=120)
    assert len(h.pids) >= 3  # torchrun + 2 workers were seen
    assert h.returncode is not None
    no_process_left(h)


@pytest.mark.multiproc
@pytest.mark.slow
def test_terminate_stops_a_running_job(tmp_path):
    h = L.launch("nbkit.jobs.pretrain", nproc_per_node=2,
                 device="cpu", show=False,
                 args=synthetic_args(tmp_path, steps=100000, extra=("--step-sleep", "0.05")))
    deadline = time.monotonic() + 120
    while not h.metrics and time.monotonic() < deadline:
        assert h.poll() is None, "\n".join(h.lines)
        time.sleep(0.1)
    assert h.metrics, "no metrics line arrived"
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
    head = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
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


def test_job_scripts_reject_a_resume_path_and_name_the_accepted_values(tmp_path):
    from nbkit.errors import ConfigError
    from nbkit.jobs import finetune, pretrain
    from nbkit.jobs.common import loop_resume

    assert loop_resume("auto") is True and loop_resume("none") is False
    for main in (pretrain.main, finetune.main):
        with pytest.raises(ConfigError, match="'auto'.*'none'"):
            main(["--scale", "smoke", "--output-dir", str(tmp_path), "--resume", str(tmp_path)])


def test_live_plot_takes_the_launchers_dicts_and_eval_lines_carry_the_step(capsys):
    from types import SimpleNamespace

    from nbkit.pipeline.plots import LivePlot

    L.MetricsPrinter().on_evaluate(SimpleNamespace(state=SimpleNamespace(step=5)), {"eval_loss": 2.0})
    plot = LivePlot(mode="none")
    sink = L._metrics_sink(plot)
    for line in ['NBKIT_METRICS {"step": 4, "loss": 3.0}', *capsys.readouterr().out.splitlines()]:
        sink(L.parse_metrics_line(line))
    assert plot.series["loss"].x == [4] and plot.series["eval_loss"].x == [5] and plot.step == 5
