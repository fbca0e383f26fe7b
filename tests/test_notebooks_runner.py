import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nbkit.cli import main as cli
from nbkit.cli import run_notebooks as notebooks
from nbkit.errors import ConfigError


def test_select_by_prefix_sorted():
    paths = [Path("02_b.ipynb"), Path("00_a.ipynb"), Path("01_c.ipynb")]
    assert [p.name for p in notebooks.select(paths, ["02", "00"])] == ["00_a.ipynb", "02_b.ipynb"]
    assert [p.name for p in notebooks.select(paths, None)][0] == "00_a.ipynb"


def test_select_unknown_prefix_lists_available():
    with pytest.raises(ValueError, match="00_a.ipynb"):
        notebooks.select([Path("00_a.ipynb")], ["09"])


def _write(path, code):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in code]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.mark.slow
def test_run_all_executes_in_order_and_stops_at_failure(tmp_path, monkeypatch, runs_tmp):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _write(nbdir / "00_ok.ipynb", ["import os\nopen(os.environ['NBKIT_RUNS_DIR'] + '/mark', 'w').write('x')"])
    _write(nbdir / "01_bad.ipynb", ["raise RuntimeError('boom')"])
    _write(nbdir / "02_never.ipynb", ["import os\nopen(os.environ['NBKIT_RUNS_DIR'] + '/never', 'w')"])
    monkeypatch.setenv("NBKIT_NOTEBOOKS_DIR", str(nbdir))
    assert notebooks.run_all(scale="smoke") == 1
    assert (runs_tmp / "mark").exists() and not (runs_tmp / "never").exists()
    executed = runs_tmp / "smoke" / "executed"
    assert (executed / "00_ok.ipynb").exists() and (executed / "01_bad.ipynb").exists()
    assert notebooks.run_all(scale="smoke", only=["00"]) == 0
    # the time per notebook (read by scripts/expect_table.py), strict JSON, only for notebooks that finished
    from nbkit.jsonio import loads_strict

    timings = loads_strict((executed / "timings.json").read_text())
    assert list(timings["seconds"]) == ["00"] and timings["seconds"]["00"] > 0
    assert "CPUs" in timings["machine"]


# --- failures while executing: partial copy saved, one line naming notebook, cell and fix


def _nbdir(tmp_path, monkeypatch, notebooks: dict[str, list[str]]):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    for name, cells in notebooks.items():
        _write(nbdir / name, cells)
    monkeypatch.setenv("NBKIT_NOTEBOOKS_DIR", str(nbdir))
    return nbdir


def _outputs(path):
    return ["".join(o.get("text", "") for o in c.outputs) for c in nbformat.read(path, as_version=4).cells]


@pytest.mark.slow
def test_cell_timeout_saves_the_partial_copy_and_names_the_fix(tmp_path, monkeypatch, runs_tmp):
    # A real `nbkit run-notebooks` process: the killed kernel's own output must stay off the console too.
    _nbdir(tmp_path, monkeypatch, {"00_slow.ipynb": ["print('first done')", "import time\ntime.sleep(60)",
                                                      "print('never')"]})
    res = subprocess.run([sys.executable, "-m", "nbkit.cli.main", "run-notebooks", "--scale", "smoke", "--timeout", "3"],
                         cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=180)
    assert res.returncode == 1, res.stderr
    err = res.stderr.strip().splitlines()
    assert "00_slow.ipynb cell 2 ('import time')" in err[0] and "within 3 s" in err[0], res.stderr
    assert "raise --timeout" in err[0] and len(err) == 2 and "Traceback" not in res.stderr
    copy = runs_tmp / "smoke" / "executed" / "00_slow.ipynb"
    assert _outputs(copy) == ["first done\n", "", ""]
    assert (runs_tmp / "smoke" / "executed" / "00_slow.kernel.log").exists()


@pytest.mark.slow
def test_cell_error_is_one_line_with_the_exception(tmp_path, monkeypatch, runs_tmp, capsys):
    _nbdir(tmp_path, monkeypatch, {"00_ok.ipynb": ["1"], "01_bad.ipynb": ["x = 1", "# load\nraise KeyError('col')"]})
    assert cli.main(["run-notebooks", "--scale", "smoke", "--timeout", "60"]) == 1
    err = capsys.readouterr().err
    assert "01_bad.ipynb cell 2 ('# load') raised KeyError: 'col'" in err and "Traceback" not in err
    assert (runs_tmp / "smoke" / "executed" / "01_bad.ipynb").exists()


@pytest.mark.slow
def test_dead_kernel_is_reported_not_raised(tmp_path, monkeypatch, runs_tmp, capsys):
    _nbdir(tmp_path, monkeypatch, {"00_dies.ipynb": ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"]})
    assert notebooks.run_all(scale="smoke", timeout=60) == 1
    err = capsys.readouterr().err
    assert "00_dies.ipynb cell 1" in err and "kernel died" in err and "Fix:" in err
    assert "Traceback" not in err
    assert (runs_tmp / "smoke" / "executed" / "00_dies.ipynb").exists()


@pytest.mark.slow
def test_kernels_get_offline_hub_and_tokenizer_settings_unless_set(tmp_path, monkeypatch, runs_tmp):
    cell = ("import os, json\nkeys = ['HF_HUB_OFFLINE', 'TOKENIZERS_PARALLELISM', 'NBKIT_SCALE', 'NBKIT_RUNS_DIR']\n"
            "json.dump({k: os.environ.get(k) for k in keys}, open(os.environ['NBKIT_RUNS_DIR'] + '/env.json', 'w'))")
    _nbdir(tmp_path, monkeypatch, {"00_env.ipynb": [cell]})
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # the user's choice is kept
    monkeypatch.setenv("NBKIT_SCALE", "cpu")
    assert notebooks.run_all(scale="smoke", timeout=60) == 0
    seen = json.loads((runs_tmp / "env.json").read_text())
    assert seen == {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "true", "NBKIT_SCALE": "smoke",
                    "NBKIT_RUNS_DIR": str(runs_tmp.resolve())}
    assert "HF_HUB_OFFLINE" not in os.environ, "the caller's environment is left alone"


# --- bad inputs: exit code 2 and one line, before any kernel starts


@pytest.mark.parametrize("args, env, expect", [
    (["--scale", "small"], {}, "unknown scale 'small' (--scale); use one of smoke, cpu, gpu"),
    ([], {"NBKIT_SCALE": "small"}, "unknown scale 'small' (NBKIT_SCALE); use one of smoke, cpu, gpu"),
    (["--scale", "smoke", "--only", "05"], {}, "no notebook matches ['05']; available: 00_a.ipynb"),
    (["--scale", "smoke"], {"NBKIT_RUNS_DIR": "/proc/nope"}, "set NBKIT_RUNS_DIR to a writable folder"),
])
def test_bad_inputs_exit_2_with_one_line(tmp_path, monkeypatch, runs_tmp, capsys, args, env, expect):
    _nbdir(tmp_path, monkeypatch, {"00_a.ipynb": ["1"]})
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["run-notebooks", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nbkit run-notebooks: error: ") and expect in lines[0]
    assert not (runs_tmp / "smoke" / "executed" / "00_a.ipynb").exists()


def test_read_only_runs_dir_is_a_bad_input(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(locked))
    with pytest.raises(ConfigError, match="NBKIT_RUNS_DIR"):
        notebooks.plan("smoke")


def test_plan_names_the_scale_it_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    p = notebooks.plan(" CPU ")
    assert p.scale == "cpu" and p.env["NBKIT_SCALE"] == "cpu"
    assert p.out_dir == tmp_path / "runs" / "cpu" / "executed"
    assert p.env["MPLBACKEND"] == notebooks.KERNEL_ENV_DEFAULTS["MPLBACKEND"]


def test_non_positive_timeout_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["run-notebooks", "--timeout", "0"])
    assert info.value.code == 2 and "positive whole number of seconds" in capsys.readouterr().err


def test_bare_only_is_an_error_not_all_notebooks():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "nbkit", "run-notebooks", "--scale", "smoke", "--only"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--only" in out.stderr and "expected at least one argument" in out.stderr


# SIGTERM at each moment of a notebook's life: the same one line and the saved copy, never a traceback.
# `timeout` signals the whole process group; the handler used to raise inside nbclient's asyncio loop
# (InvalidStateError, 'NoneType' object has no attribute 'cleanup_resources', no copy). Each moment is
# reached by waiting on what the runner or the kernel shows, so a busy machine only makes it slower.
MOMENTS = ("kernel start-up", "a running cell", "kernel shutdown")


@pytest.mark.slow
@pytest.mark.parametrize("moment", MOMENTS)
def test_sigterm_saves_the_copy_and_says_what_stopped_it(tmp_path, monkeypatch, runs_tmp, moment):
    import signal
    import threading

    from waiting import wait_until

    marker = tmp_path / "reached"
    second = {"kernel start-up": "import time\ntime.sleep(120)",
              "a running cell": f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)",
              "kernel shutdown": ("import atexit, time\natexit.register(time.sleep, 60)\n"   # atexit: last in, first out
                                  f"atexit.register(lambda: open({str(marker)!r}, 'w').close())")}[moment]
    _nbdir(tmp_path, monkeypatch, {"00_slow.ipynb": ["print('first done')", second]})
    proc = subprocess.Popen([sys.executable, "-m", "nbkit.cli.main", "run-notebooks", "--scale", "smoke"],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)   # progress lines
    reader.start()
    try:
        if moment == "kernel start-up":
            wait_until(lambda: any("start: 2 code cells" in line for line in seen), what="the runner's start line")
        else:
            wait_until(marker.exists, what=f"the kernel reaching {moment}")
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err
    lines = err.strip().splitlines()
    assert "stopped by a signal (SIGTERM" in lines[0] and lines[1].startswith("executed copy"), err
    assert len(lines) == 2 and "Traceback" not in err, err
    outputs = _outputs(runs_tmp / "smoke" / "executed" / "00_slow.ipynb")
    if moment == "a running cell":
        assert "00_slow.ipynb cell 2 ('import time')" in lines[0] and outputs[0] == "first done\n"
    if moment == "kernel shutdown":
        assert outputs == ["first done\n", ""]                # every cell ran: the copy is complete


def _sigterm_when(marker: Path, what: str) -> tuple[int, str, float]:
    """Start ``run-notebooks`` at smoke, send its process group SIGTERM once ``marker`` exists (a cell wrote it),
    and return the exit code, stderr and the seconds from the signal to the exit."""
    import signal
    import threading
    import time

    from waiting import wait_until

    proc = subprocess.Popen([sys.executable, "-m", "nbkit.cli.main", "run-notebooks", "--scale", "smoke"],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    reader = threading.Thread(target=lambda: list(proc.stdout), daemon=True)
    reader.start()
    try:
        wait_until(marker.exists, timeout=300, what=what)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_sigterm_interrupts_a_training_kernel_first_so_its_checkpoint_is_saved_and_named(tmp_path, monkeypatch,
                                                                                            runs_tmp):
    """A SIGTERM to the runner while a notebook trains: the kernel is interrupted as Ctrl-C does (the loop saves
    after its step), then stopped; the runner's line says which checkpoint was saved. It used to be killed
    outright: every step since the last checkpoint lost, and the line did not say so."""
    from nbkit.train import checkpoint as ckpt

    tests, marker, run = Path(__file__).resolve().parent, tmp_path / "training", tmp_path / "run"
    train = (f"import sys, time\nsys.path.insert(0, {str(tests)!r})\nfrom test_interrupt import _loop\n"
             "class Mark:\n    def on_step_end(self, loop):\n        time.sleep(0.05)\n"
             f"        if loop.state.step == 2:\n            open({str(marker)!r}, 'w').close()\n"
             f"loop = _loop({str(run)!r}, [Mark()], max_steps=100000, checkpoint_every=None)\nloop.fit()")
    _nbdir(tmp_path, monkeypatch, {"00_train.ipynb": ["print('first done')", train, "print('never')"]})
    rc, err, _ = _sigterm_when(marker, "the kernel training past step 2")
    assert rc == 143, err
    saved = ckpt.load_latest(run)
    assert saved is not None and saved.step >= 2, err           # before: killed outright, no checkpoint at all
    lines = err.strip().splitlines()
    assert "00_train.ipynb cell 2" in lines[0] and "stopped by a signal (SIGTERM" in lines[0], err
    assert ("the kernel was interrupted first (as Ctrl-C does) and the training cell said: Ctrl-C: stopped at "
            f"step {saved.step} of 100000; checkpoint saved: {saved.path}") in lines[0], err
    assert len(lines) == 2 and "Traceback" not in err, err


@pytest.mark.slow
def test_a_kernel_that_ignores_the_interrupt_is_killed_after_the_wait_and_the_line_says_the_work_is_lost(
        tmp_path, monkeypatch, runs_tmp):
    """The other branch of the SIGTERM path: a cell that ignores SIGINT (a C extension, a sleep in a handler) is
    killed INTERRUPT_WAIT_S after its interrupt; the runner exits 143 within the grace it documents and says that
    the cell's work since its last checkpoint is lost, instead of naming a checkpoint it does not have."""
    from nbkit.cli.run_notebooks import INTERRUPT_WAIT_S

    marker = tmp_path / "stuck"
    stuck = ("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
             f"open({str(marker)!r}, 'w').close()\nwhile True:\n    time.sleep(0.1)")
    _nbdir(tmp_path, monkeypatch, {"00_stuck.ipynb": ["print('first done')", stuck, "print('never')"]})
    rc, err, took = _sigterm_when(marker, "the kernel in its SIGINT-proof cell")
    assert rc == 143, err
    assert INTERRUPT_WAIT_S <= took < INTERRUPT_WAIT_S + 30, (took, err)   # waited, then killed: not at once
    lines = err.strip().splitlines()
    assert "00_stuck.ipynb cell 2" in lines[0] and "stopped by a signal (SIGTERM" in lines[0], err
    assert (f"the kernel did not end the running cell within {INTERRUPT_WAIT_S:.0f} s of its interrupt and was "
            "killed: what that cell did since its last checkpoint is lost") in lines[0], err
    assert "Traceback" not in err, err


def test_nbclient_cleanup_error_after_a_dead_kernel_reads_as_a_dead_kernel():
    exc = AttributeError("'NoneType' object has no attribute 'cleanup_resources'")
    line = notebooks.failure_line("03_x.ipynb", exc, 4, {"source": "from nbkit import LivePlot"}, 60)
    assert "kernel died" in line and "Fix:" in line and "AttributeError" not in line
