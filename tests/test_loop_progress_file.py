"""D12: a long training cell reports the loop's own progress (step / total, loss, ETA) to the headless runner.

Loop.setup() adds nbkit.train.callbacks.ProgressFile.from_env() when NBKIT_PROGRESS_FILE is set (the
runner sets it per notebook); the runner's heartbeat reads it with nbkit.cli.run_notebooks.loop_status.
"""
from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import nbformat
import pytest

from nbkit.cli.run_notebooks import NotebookProgress, loop_status
from nbkit.train.callbacks import ProgressFile

ENV = ProgressFile.ENV

TESTS = Path(__file__).resolve().parent


class _Slow:
    """A callback that makes each step last ``s`` seconds (a long cell on a fast machine)."""

    def __init__(self, s: float):
        self.s = s

    def on_step_end(self, loop):
        time.sleep(self.s)


def _fit(tmp_path, callbacks=(), max_steps=6):
    from loop_helpers import mlm_collate, tiny_mlm, token_data

    from nbkit.train import Loop, TrainConfig

    cfg = TrainConfig(max_steps=max_steps, batch_size=4, log_every=2, lr=1e-3, progress=False, seed=0)
    return Loop(tiny_mlm(), cfg, token_data(24), collate_fn=mlm_collate, callbacks=list(callbacks), device="cpu")


def test_the_loop_writes_step_total_loss_and_eta_when_the_env_names_a_file(tmp_path, monkeypatch):
    path = tmp_path / "p.json"
    seen = []

    class Spy:
        def on_step_end(self, loop):
            seen.append(json.loads(path.read_text()))

    monkeypatch.setenv(ENV, str(path))
    loop = _fit(tmp_path, [Spy()])
    loop.setup()                                 # where the loop reads the variable
    assert sum(isinstance(cb, ProgressFile) for cb in loop.callbacks) == 1
    loop.callbacks = [cb if not isinstance(cb, ProgressFile) else ProgressFile(path, every_s=0)
                      for cb in loop.callbacks]
    loop.callbacks.append(loop.callbacks.pop(0))  # Spy after the writer: it reads this step's status
    loop.fit()
    assert [s["step"] for s in seen] == [1, 2, 3, 4, 5, 6] and {s["total"] for s in seen} == {6}
    assert seen[0]["loss"] is None and seen[2]["loss"] > 0, "the loss logged at step 2 shows from then on"
    assert all(s["eta_s"] is not None and s["eta_s"] >= 0 for s in seen) and seen[-1]["eta_s"] == 0
    final = json.loads(path.read_text())
    assert final["done"] is True and final["step"] == 6


def test_no_file_no_callback_and_no_duplicate(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    assert ProgressFile.from_env() is None
    loop = _fit(tmp_path)
    loop.setup()
    assert not any(isinstance(cb, ProgressFile) for cb in loop.callbacks)
    monkeypatch.setenv(ENV, str(tmp_path / "x.json"))
    assert ProgressFile.from_env().path == tmp_path / "x.json"
    mine = ProgressFile(tmp_path / "mine.json")
    loop = _fit(tmp_path, [mine])
    loop.setup()
    loop.setup()
    assert loop.callbacks == [mine]


def test_writes_are_throttled_and_a_failed_one_warns_once_then_stops(tmp_path):
    class L:  # the loop's surface the callback reads
        class state:
            step = 0

        class config:
            max_steps = 100

    cb = ProgressFile(tmp_path / "p.json", every_s=60)
    cb.on_train_begin(L)
    first = (tmp_path / "p.json").read_text()
    L.state.step = 5
    cb.on_step_end(L)
    assert (tmp_path / "p.json").read_text() == first, "throttled: at most one write per every_s"
    gone = ProgressFile(tmp_path / "no" / "such" / "dir" / "p.json", every_s=0)
    (tmp_path / "no").write_text("a file where a folder should be")
    with pytest.warns(UserWarning, match=r"progress file .*p\.json .*Error") as rec:
        gone.on_train_begin(L)   # training goes on
        gone.on_step_end(L)
        gone.on_train_end(L, None)
    assert len(rec) == 1 and gone.failed, "one warning, then no more attempts"


def test_a_full_disk_while_writing_progress_never_stops_training(tmp_path, monkeypatch):
    """write_json reports ENOSPC as nbkit.errors.WriteError (a ValueError, not an OSError)."""
    import nbkit.jsonio
    from nbkit.errors import WriteError

    class L:
        class state:
            step = 3

        class config:
            max_steps = 10

    calls = []

    def full(*a, **k):
        calls.append(1)
        raise WriteError("no space left on device")

    monkeypatch.setattr(nbkit.jsonio, "write_json", full)
    cb = ProgressFile(tmp_path / "p.json", every_s=0)
    with pytest.warns(UserWarning, match="no space left on device"):
        cb.on_train_begin(L)
        cb.on_step_end(L)
    assert calls == [1] and "WriteError" in cb.failed


def test_loop_status_reads_only_this_cells_unfinished_run(tmp_path):
    path = tmp_path / "p.json"
    now = time.time()
    path.write_text(json.dumps({"step": 12, "total": 40, "loss": 3.2109, "eta_s": 71.2, "updated": now,
                                "done": False}))
    assert loop_status(path, since=now - 5) == "training step 12/40, loss 3.211, ETA 1 min 11 s"
    assert loop_status(path, since=now + 5) is None, "written before this cell started: an earlier loop"
    path.write_text(json.dumps({"step": 40, "total": 40, "loss": None, "eta_s": None, "updated": now, "done": True}))
    assert loop_status(path, since=0) is None
    path.write_text('{"step": 1, "total": 4, "updated": ')  # half-written by a foreign writer
    assert loop_status(path, since=0) is None and loop_status(tmp_path / "missing", 0) is None


def test_the_heartbeat_line_carries_the_loops_progress(tmp_path):
    path, out = tmp_path / "p.json", io.StringIO()
    with NotebookProgress("02_x", total=3, stream=out, tty=False, heartbeat_s=0.2, status_file=path) as pr:
        pr.cell_started(nbformat.v4.new_code_cell("result = loop.fit()"), 4)
        path.write_text(json.dumps({"step": 7, "total": 14, "loss": 2.5, "eta_s": 30, "updated": time.time(),
                                    "done": False}))
        time.sleep(0.7)
    beats = [ln for ln in out.getvalue().splitlines() if "still running" in ln]
    assert beats and all(ln.endswith("; training step 7/14, loss 2.5, ETA 30 s") for ln in beats), out.getvalue()


@pytest.mark.slow
def test_a_training_cell_under_the_runner_shows_its_steps(tmp_path, monkeypatch, runs_tmp, capsys):
    from nbkit.cli import run_notebooks

    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(
        f"import sys, time\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from test_loop_progress_file import _Slow, _fit\n"
        "loop = _fit(None, [_Slow(0.4)], max_steps=12)"),
        nbformat.v4.new_code_cell("result = loop.fit()  # the long training cell")]
    nbformat.write(nb, nbdir / "02_train.ipynb")
    monkeypatch.setenv("NBKIT_NOTEBOOKS_DIR", str(nbdir))
    assert run_notebooks.run_all(scale="smoke", timeout=300, heartbeat_s=0.5) == 0
    out = capsys.readouterr().out
    beats = [ln for ln in out.splitlines() if "still running cell 2: result = loop.fit()" in ln]
    steps = [ln for ln in beats if "; training step " in ln and "/12, " in ln and "ETA " in ln]
    assert len(steps) >= 2, out
    assert not any("training step" in ln for ln in out.splitlines() if "cell 1:" in ln), out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
