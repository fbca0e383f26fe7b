"""Notebooks are versioned as text: each notebooks/NN_*.ipynb has a Jupytext percent-format .py pair.

The .py is the reviewed source; the .ipynb is what JupyterLab and ``pytest --nbval`` open.
Both must hold the same cells; the .ipynb is committed without outputs, with stable cell
ids, the ``parameters`` tag on its first code cell and the ``python3`` kernelspec.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def cells(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    """What a reviewer sees of each cell: type, source, tags."""
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", ()))) for c in nb.cells]


def out_of_sync(ipynb: Path) -> str | None:
    """None when ``ipynb`` and its .py pair hold the same cells, else what differs first."""
    text = ipynb.with_suffix(".py")
    if not text.is_file():
        return f"{ipynb.name} has no text pair {text.name}: run `jupytext --set-formats ipynb,py:percent {ipynb}`"
    a, b = cells(nbformat.read(ipynb, as_version=4)), cells(jupytext.read(text))
    if a == b:
        return None
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return (f"{ipynb.name} and {text.name} differ at cell {i} ({len(a)} vs {len(b)} cells): "
            f"run `python scripts/notebook_pairs.py notebooks/{ipynb.name}` (the side changed since HEAD wins; "
            "both changed is refused)")


def test_every_notebook_has_a_text_pair():
    assert [p.stem for p in NOTEBOOKS] == sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_in_sync(ipynb):
    assert out_of_sync(ipynb) is None, out_of_sync(ipynb)


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_clean(ipynb):
    nb = nbformat.read(ipynb, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), "first code cell must be tagged parameters"
    assert all(not c.outputs and c.execution_count is None for c in code), "strip outputs before committing"
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids) and all(ids)


def test_stale_pair_is_detected_and_sync_updates_the_notebook(tmp_path):
    """Editing the text file makes the pair stale; `jupytext --sync` brings the .ipynb in line, ids kept."""
    src = NOTEBOOKS[1]
    for suffix in (".ipynb", ".py"):
        shutil.copy(src.with_suffix(suffix), tmp_path / (src.stem + suffix))
    ipynb, text = tmp_path / src.name, tmp_path / (src.stem + ".py")
    ids_before = [c.id for c in nbformat.read(ipynb, as_version=4).cells]
    text.write_text(text.read_text().replace("# %% [markdown]", "# %% [markdown]\n# An added line.", 1))
    assert "differ at cell" in out_of_sync(ipynb)
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", str(ipynb)], check=True, capture_output=True)
    assert out_of_sync(ipynb) is None
    nb = nbformat.read(ipynb, as_version=4)
    assert "An added line." in nb.cells[0].source or "An added line." in nb.cells[1].source
    assert [c.id for c in nb.cells] == ids_before


@pytest.mark.parametrize("ipynb", NOTEBOOKS, ids=lambda p: p.stem)
def test_text_pair_names_the_python3_kernel(ipynb):
    """The .py pair carries the kernelspec too, and `jupytext --sync` writes it into the .ipynb."""
    assert jupytext.read(ipynb.with_suffix(".py")).metadata["kernelspec"]["name"] == "python3"


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_nbval_runs_a_notebook_from_another_environment_in_this_one(tmp_path):
    """C04: a notebook saved with kernelspec ``conda-env-nlp-py`` still runs under pytest --nbval.

    The repository's pytest configuration adds ``--nbval-current-env`` (the kernel is
    this interpreter), so every nbval run (scripts/test.sh, the README, by hand) gets it.
    """
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys\nprint(sys.executable)")])
    nb.metadata["kernelspec"] = {"name": "conda-env-nlp-py", "display_name": "Python [conda env:nlp]",
                                 "language": "python"}
    path = tmp_path / "foreign_kernel.ipynb"
    nbformat.write(nb, path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                          "-p", "no:cacheprovider", "-q", "--nbval-lax", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "NoSuchKernel" not in run.stdout
