"""D07/D13: in JupyterLab a notebook pair (NN_name.ipynb + its Jupytext .py) is ONE notebook.

docker/jupyter_server_config.py sets a contents manager that lists a pair once (the .ipynb);
jupytext's server extension derives its own manager from it, so saving the .ipynb writes the
.py too. These tests build that stack in-process from the loaded config, on fresh files; one
slow test starts the real server and reads its listing.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import jupytext
import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "docker" / "jupyter_server_config.py"


def make_pair(folder: Path, stem: str) -> None:
    nb = nbformat.v4.new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "jupytext": {"formats": "ipynb,py:percent"}})
    nb.cells = [nbformat.v4.new_code_cell("rate = 0.5", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_markdown_cell("# 标题")]
    nbformat.write(nb, folder / f"{stem}.ipynb")
    jupytext.write(nb, folder / f"{stem}.py", fmt="py:percent")


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """The contents manager the server runs: jupytext's, derived from the config's class, rooted at tmp_path."""
    from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    monkeypatch.delenv("NBKIT_BEHIND_PROXY", raising=False)
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "")
    cfg = PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()
    base = cfg.ServerApp.contents_manager_class
    assert not hasattr(base, "formats"), "must be a plain manager that jupytext's extension derives from"
    make_pair(tmp_path, "07_pair")
    (tmp_path / "tool.py").write_text("print('a script')\n")                 # a lone script
    (tmp_path / "other.py").write_text("x = 1\n")                            # same stem, not paired
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "other.ipynb")
    (tmp_path / "sub").mkdir()
    make_pair(tmp_path / "sub", "08_nested")
    return build_async_jupytext_contents_manager_class(base)(root_dir=str(tmp_path))


def names(cm, path: str = "") -> set[str]:
    return {e["name"] for e in asyncio.run(cm.get(path))["content"]}


def test_the_file_browser_lists_each_pair_once(lab):
    assert names(lab) == {"07_pair.ipynb", "tool.py", "other.py", "other.ipynb", "sub"}
    assert names(lab, "sub") == {"08_nested.ipynb"}


def test_the_hidden_text_file_still_opens_as_the_same_notebook(lab):
    model = asyncio.run(lab.get("07_pair.py"))
    assert model["type"] == "notebook"
    assert [c.source for c in model["content"].cells] == ["rate = 0.5", "# 标题"]


def test_saving_the_ipynb_in_lab_writes_the_py_pair(lab, tmp_path):
    model = asyncio.run(lab.get("07_pair.ipynb"))
    model["content"].cells.append(nbformat.v4.new_markdown_cell("NOTES FROM LAB"))
    asyncio.run(lab.save(model, "07_pair.ipynb"))
    assert "NOTES FROM LAB" in (tmp_path / "07_pair.py").read_text(encoding="utf-8")


def test_jupytext_is_a_runtime_dependency_with_its_server_extension():
    """The image installs [project].dependencies (docker/Dockerfile step 5): jupytext must be there."""
    import sys

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("jupytext") for d in deps) and any(d.startswith("papermill") for d in deps)
    assert "['project']['dependencies']" in (ROOT / "docker" / "Dockerfile").read_text()
    enabled = Path(sys.prefix, "etc/jupyter/jupyter_server_config.d/jupytext.json")
    assert enabled.is_file() and "jupyterlab_jupytext" in enabled.read_text()
