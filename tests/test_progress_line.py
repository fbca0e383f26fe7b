"""A long run is visible anywhere: the loop's plain progress line (step/total, loss, lr, tokens/s, elapsed, ETA) on
stdout, throttled by time; ``nbkit run-notebooks`` shows those lines while a cell trains; papermill's
``--log-output`` of notebook 02 carries them."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from nbkit.cli.run_notebooks import LOOP_PREFIX, NotebookProgress, loop_lines
from nbkit.train.callbacks import ProgressLine

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
LINE = re.compile(r"^train step \d+/\d+ \(\d+%\) \| loss \S+ \| lr \S+ \| [\d,]+ tokens/s \| elapsed .+ \| (ETA .+|done|stopped before \d+)$")


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def fake_loop(step=0, total=40, tokens=0):
    return SimpleNamespace(state=SimpleNamespace(step=step, train_tokens=tokens), config=SimpleNamespace(max_steps=total),
                           optimizer=SimpleNamespace(param_groups=[{"lr": 9.9}]), last_step=None)


def test_the_line_says_step_total_loss_lr_rate_elapsed_and_eta():
    clock, out = Clock(), io.StringIO()
    cb = ProgressLine(every_s=30, stream=out, clock=clock)
    loop = fake_loop(step=2, tokens=500)                   # a resumed run: 2 steps, 500 tokens before
    cb.on_train_begin(loop)
    clock.t += 10.0
    loop.state.step, loop.state.train_tokens = 12, 12_500    # 10 steps and 12,000 tokens in 10 s here
    loop.last_step = {"loss_sum": 64.0, "n_label": 20, "lr": 1e-3}
    assert cb.line(loop) == "train step 12/40 (30%) | loss 3.2 | lr 1.00e-03 | 1,200 tokens/s | elapsed 10 s | ETA 28 s"
    cb.on_log(loop, {"loss": 3.21094})                     # the log window's mean wins over the last step's
    assert "| loss 3.211 |" in cb.line(loop)
    loop.state.step = 40
    assert cb.line(loop, done=True).endswith("| elapsed 10 s | done")


def test_lines_are_throttled_by_time_first_step_and_end_always():
    clock, out = Clock(), io.StringIO()
    cb = ProgressLine(every_s=30, stream=out, clock=clock)
    loop = fake_loop(total=100)
    cb.on_train_begin(loop)
    for step, dt in enumerate([1, 1, 10, 10, 9, 2, 29, 5], start=1):   # seconds each step takes
        clock.t += dt
        loop.state.step, loop.state.train_tokens = step, 100 * step
        loop.last_step = {"loss_sum": 5.0, "n_label": 1, "lr": 1e-3}
        cb.on_step_end(loop)
    cb.on_train_end(loop, None)
    lines = out.getvalue().splitlines()
    # printed at step 1 (t=1), then the first step 30 s later or more (step 5: t=31), step 7 (t=62), the end
    assert [int(re.match(r"train step (\d+)/", ln).group(1)) for ln in lines] == [1, 5, 7, 8], lines
    assert all(LINE.match(ln) for ln in lines), lines
    assert lines[-1].endswith("| stopped before 100") and "ETA" in lines[-2]


def test_the_loop_adds_one_line_callback_from_its_config_and_none_when_off(capsys):
    from loop_helpers import mlm_collate, tiny_mlm, token_data

    from nbkit.train import Loop, TrainConfig

    def loop(**kw):
        cfg = TrainConfig(max_steps=4, batch_size=4, log_every=2, progress=False, **kw)
        return Loop(tiny_mlm(), cfg, token_data(16), collate_fn=mlm_collate, device="cpu", callbacks=kw.pop("cbs", ()))

    loop(progress_every_s=30.0).fit()
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("train step")]
    assert len(lines) == 2 and lines[0].startswith("train step 1/4") and lines[1].endswith("| done"), lines
    assert all(LINE.match(ln) for ln in lines)
    quiet = loop(progress_every_s=None)
    quiet.fit()
    assert "train step" not in capsys.readouterr().out
    assert not any(isinstance(cb, ProgressLine) for cb in quiet.callbacks)
    mine = ProgressLine(every_s=1e9)
    given = Loop(tiny_mlm(), TrainConfig(max_steps=2, batch_size=4, progress=False), token_data(8),
                 collate_fn=mlm_collate, device="cpu", callbacks=[mine])
    given.setup()
    given.setup()
    assert given.callbacks == [mine]


def test_the_runner_recognises_the_loops_lines():
    assert LOOP_PREFIX == ProgressLine.PREFIX
    chunk = "precision: fp32\ntrain step 3/9 (33%) | loss 4.1 | lr 1.00e-03 | 9 tokens/s | elapsed 1 s | ETA 2 s\n"
    assert loop_lines(chunk) == [chunk.splitlines()[1]]
    out = io.StringIO()
    with NotebookProgress("02_x", total=3, stream=out, tty=False, heartbeat_s=60) as pr:
        pr.cell_started(nbformat.v4.new_code_cell("result = loop.fit()"), 4)
        pr.cell_output(chunk)
        pr.cell_output("some other output\n")
    assert out.getvalue().splitlines()[-1] == "[02_x] " + chunk.splitlines()[1]
    assert pr.loop_line == chunk.splitlines()[1]


@pytest.mark.slow
def test_a_training_cell_under_the_runner_shows_its_steps_while_it_runs(tmp_path, monkeypatch, runs_tmp, capsys):
    from nbkit.cli import run_notebooks

    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(
        f"import sys, time\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from loop_helpers import mlm_collate, tiny_mlm, token_data\nfrom nbkit.train import Loop, TrainConfig\n"
        "class Slow:\n    def on_step_end(self, loop):\n        time.sleep(0.4)\n"
        "cfg = TrainConfig(max_steps=12, batch_size=4, log_every=2, progress=False, progress_every_s=1.0)\n"
        "loop = Loop(tiny_mlm(), cfg, token_data(24), collate_fn=mlm_collate, callbacks=[Slow()], device='cpu')"),
        nbformat.v4.new_code_cell("result = loop.fit()  # the long training cell")]
    nbformat.write(nb, nbdir / "02_train.ipynb")
    monkeypatch.setenv("NBKIT_NOTEBOOKS_DIR", str(nbdir))
    assert run_notebooks.run_all(scale="smoke", timeout=300, heartbeat_s=0.5) == 0
    out = capsys.readouterr().out.splitlines()
    steps = [i for i, ln in enumerate(out) if ln.startswith("[02_train] train step ") and "ETA " in ln]
    done = next(i for i, ln in enumerate(out) if ln.startswith("[02_train] done in"))
    assert len(steps) >= 3 and steps[-1] < done, out           # shown while the cell ran, not after
    assert any(ln.startswith("[02_train] train step 12/12") and ln.endswith("| done") for ln in out), out


@pytest.mark.slow
def test_papermill_log_output_of_notebook_02_shows_step_and_eta_lines(tmp_path):
    env = {**os.environ, "NBKIT_RUNS_DIR": str(tmp_path / "runs"), "NBKIT_SCALE": "smoke", "MPLBACKEND": "Agg",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "papermill", "--log-output", "--no-progress-bar",
                           str(ROOT / "notebooks" / "02_bert_mlm_pretraining.ipynb"), str(tmp_path / "out.ipynb"),
                           "-p", "scale", "smoke", "--cwd", str(ROOT / "notebooks")],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = [ln.split(" - INFO - ", 1)[-1].strip() for ln in (proc.stdout + proc.stderr).splitlines()]
    lines = [ln for ln in log if ln.startswith("train step ")]
    assert any(LINE.match(ln) and "| ETA " in ln for ln in lines), lines or log[-40:]
    assert any(LINE.match(ln) and ln.endswith("| done") for ln in lines), lines
