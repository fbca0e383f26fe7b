"""Test lanes: `scripts/test.sh --fast` leaves out the slow lanes, and a full run executes each notebook once."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _load import load_script

ROOT = Path(__file__).resolve().parents[1]


def _browser_conftest():
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    return load_script(ROOT / "tests" / "browser" / "conftest.py", "browser_conftest")


@pytest.mark.parametrize("group", ["", "@notebooks"])   # an xdist worker's node ids end in @<group>
def test_nbval_cells_of_a_notebook_the_browser_runs_are_deselected_and_the_others_kept(group):
    mod = _browser_conftest()
    nb = ROOT / "notebooks"
    browser = "tests/browser/test_jupyterlab.py::test_notebook_runs_clean_in_the_browser"
    items = [SimpleNamespace(nodeid=f"{browser}[00_environment_check.ipynb]{group}", path=ROOT / "tests/browser/x.py"),
             SimpleNamespace(nodeid="notebooks/00_environment_check.ipynb::Cell 0", path=nb / "00_environment_check.ipynb"),
             SimpleNamespace(nodeid="notebooks/00_environment_check.ipynb::Cell 1", path=nb / "00_environment_check.ipynb"),
             SimpleNamespace(nodeid="notebooks/01_tokenizing.ipynb::Cell 0", path=nb / "01_tokenizing.ipynb"),
             SimpleNamespace(nodeid="tmp/00_environment_check.ipynb::Cell 0", path=ROOT / "tmp/00_environment_check.ipynb")]
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    kept = list(items)
    mod.run_each_notebook_once(config, kept)
    assert [i.nodeid for i in deselected] == [items[1].nodeid, items[2].nodeid]
    assert kept == [items[0], items[3], items[4]]      # 01 has no browser run here; another folder's copy is not ours


def _collect(*args: str) -> str:
    env = {**os.environ, "NBKIT_CHROMIUM": "/bin/true", "NBKIT_REQUIRE_BROWSER": ""}   # a browser "present"
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--nbval",
                          "tests/browser/test_jupyterlab.py", "notebooks/00_environment_check.ipynb", *args],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


@pytest.mark.slow  # two pytest subprocesses collecting the browser suite: ~20 s on 2 cores
def test_a_session_with_the_browser_suite_collects_each_notebook_once():
    """Collection only (nothing runs): nbval's cells of notebook 00 go when its browser run stays selected."""
    both = _collect()
    assert "test_notebook_runs_clean_in_the_browser[00_environment_check.ipynb]" in both
    assert "00_environment_check.ipynb::Cell" not in both and re.search(r"\d+ deselected", both)
    without_browser = _collect("-m", "not browser")          # -m drops the browser run first: nbval keeps its own
    assert "00_environment_check.ipynb::Cell 0" in without_browser
    assert "test_notebook_runs_clean_in_the_browser" not in without_browser


def test_fast_lane_leaves_out_browser_docker_multiproc_slow_and_notebooks():
    script = (ROOT / "scripts" / "test.sh").read_text()
    fast = script[script.index('"--fast" ]'):script.index("\nfi\n", script.index('"--fast" ]'))]
    assert '-m "not browser and not docker and not multiproc and not slow"' in fast
    assert "--ignore=tests/browser --ignore=tests/docker" in fast and " tests " in fast
    assert "--nbval" not in fast and "notebooks" not in fast and "pre-commit" not in fast


def test_the_fast_lane_adds_the_test_tools_to_a_venv_from_the_readmes_plain_setup(tmp_path):
    """README: `scripts/setup.sh` (no test extra), then `scripts/test.sh --fast`: hadolint and pytest were missing and
    two tests failed. The lane now installs nbkit's [test] extra first; a fake .venv records what it is asked."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test.sh").write_text((ROOT / "scripts" / "test.sh").read_text())
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    log = tmp_path / "calls.log"
    (venv / "python").write_text(f"""#!/usr/bin/env bash
echo "$*" >> {log}
case "$*" in
  "-c import pytest, nbval, xdist") [ -e {venv}/hadolint ] ;;
  "-m pip install -q -e .[test]") touch {venv}/hadolint; chmod +x {venv}/hadolint ;;
esac
""")
    (venv / "python").chmod(0o755)
    run = subprocess.run(["bash", "scripts/test.sh", "--fast", "-k", "nothing"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    calls = log.read_text().splitlines()
    assert calls.index("-m pip install -q -e .[test]") < next(i for i, c in enumerate(calls) if c.startswith("-m pytest"))
    assert "installing the test tools" in run.stdout
    log.write_text("")                                   # now complete: nothing more is installed
    subprocess.run(["bash", "scripts/test.sh", "--fast"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert not any("pip install" in c for c in log.read_text().splitlines())
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\ndependencies = ['tensorboard']\n")
    subprocess.run(["bash", "scripts/test.sh", "--fast"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "-m pip install -q -e .[test]" in log.read_text().splitlines()   # a new dependency: installed
