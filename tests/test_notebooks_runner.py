from pathlib import Path

import nbformat
import pytest

from nbkit import notebooks


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
