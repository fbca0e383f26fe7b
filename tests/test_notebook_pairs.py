"""D07: scripts/notebook_pairs.py (the pre-commit hook) syncs a notebook pair by content since HEAD.

`jupytext --sync` keeps the newer file: a cell added in JupyterLab to the .ipynb vanished when
a newer .py arrived from git. Each test builds a fresh git repository with its own small pair.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import pytest
from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "scripts" / "notebook_pairs.py"
PYPROJECT_JUPYTEXT = """[tool.jupytext]
formats = "ipynb,py:percent"
notebook_metadata_filter = "kernelspec,-jupytext.text_representation.jupytext_version"
cell_metadata_filter = "tags,-all"
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repo with one committed, synced pair notebooks/07_demo.{ipynb,py} (3 cells)."""
    git(tmp_path, "init", "-q")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT_JUPYTEXT)
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell("speed = 3", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_markdown_cell("## 速度"), nbformat.v4.new_code_cell("print(speed * 2)")]
    nbformat.write(nb, tmp_path / "notebooks" / "07_demo.ipynb")
    subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--set-formats", "ipynb,py:percent",
                    "notebooks/07_demo.ipynb"], cwd=tmp_path, check=True)
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "pair")
    return tmp_path


def _load_hook():
    return load_script(HOOK, "notebook_pairs")


notebook_pairs = _load_hook()


def run_hook(repo: Path, *files: str, check: bool = False) -> subprocess.CompletedProcess:
    """The hook's main() in this process (as pre-commit runs it: from the repository root)."""
    import contextlib
    import io

    err, cwd = io.StringIO(), os.getcwd()
    os.chdir(repo)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = notebook_pairs.main([*(["--check"] if check else []), *files])
    finally:
        os.chdir(cwd)
    return subprocess.CompletedProcess(["notebook_pairs.py", *files], rc, "", err.getvalue())


def add_lab_cell(repo: Path, text: str) -> None:
    """What JupyterLab without jupytext does: only the .ipynb changes."""
    path = repo / "notebooks" / "07_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(text))
    nbformat.write(nb, path)


def edit_py(repo: Path, line: str) -> None:
    """What a `git pull` or an editor does: only the .py changes, and it is the newer file."""
    path = repo / "notebooks" / "07_demo.py"
    time.sleep(0.05)
    path.write_text(path.read_text() + f"\n# %%\n{line}\n")
    later = time.time() + 5
    os.utime(path, (later, later))


def sources(repo: Path, ext: str) -> str:
    return "\n".join(c.source for c in jupytext.read(repo / "notebooks" / f"07_demo{ext}").cells)


def test_both_sides_changed_is_refused_and_nothing_is_written(repo):
    add_lab_cell(repo, "NOTES FROM LAB: 类别不平衡")
    edit_py(repo, 'print("from a teammate")')
    before = {p.name: p.read_bytes() for p in (repo / "notebooks").iterdir()}
    out = run_hook(repo, "notebooks/07_demo.py")
    assert out.returncode == 1, out
    assert "REFUSED" in out.stderr and "both changed since HEAD" in out.stderr, out.stderr
    assert "jupytext --to py:percent notebooks/07_demo.ipynb" in out.stderr  # keep the .ipynb
    assert "jupytext --update --to ipynb notebooks/07_demo.py" in out.stderr  # keep the .py
    assert "NOTES FROM LAB" in out.stderr and "cell 4" in out.stderr, "the message shows where they part"
    assert before == {p.name: p.read_bytes() for p in (repo / "notebooks").iterdir()}


def test_only_the_ipynb_changed_wins_even_when_the_py_is_newer(repo):
    add_lab_cell(repo, "NOTES FROM LAB")
    later = time.time() + 5
    os.utime(repo / "notebooks" / "07_demo.py", (later, later))  # a checkout touched the .py: mtime says .py
    out = run_hook(repo, "notebooks/07_demo.ipynb")
    assert out.returncode == 1 and "rewrote notebooks/07_demo.py" in out.stderr, out
    assert "NOTES FROM LAB" in sources(repo, ".py") and "NOTES FROM LAB" in sources(repo, ".ipynb")
    assert run_hook(repo).returncode == 0, "synced: a second run passes"


def test_only_the_py_changed_updates_the_ipynb_and_keeps_its_outputs(repo):
    path = repo / "notebooks" / "07_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="6\n")]
    nbformat.write(nb, path)  # outputs only: not a content change
    edit_py(repo, "print(speed + 1)")
    out = run_hook(repo, "notebooks/07_demo.py")
    assert out.returncode == 1 and "rewrote notebooks/07_demo.ipynb" in out.stderr, out
    after = nbformat.read(path, as_version=4)
    assert after.cells[-1].source == "print(speed + 1)" and after.cells[2].outputs[0]["text"] == "6\n"
    assert after.cells[0].metadata["tags"] == ["parameters"]
    assert run_hook(repo).returncode == 0


def test_check_mode_reports_and_writes_nothing(repo):
    edit_py(repo, "x = 1")
    before = (repo / "notebooks" / "07_demo.ipynb").read_bytes()
    out = run_hook(repo, check=True)
    assert out.returncode == 1 and "out of sync, only 07_demo.py changed" in out.stderr, out
    assert (repo / "notebooks" / "07_demo.ipynb").read_bytes() == before


def test_a_synced_pair_and_unrelated_files_pass(repo):
    (repo / "notebooks" / "helper.py").write_text("x = 1\n")  # no .ipynb beside it: not a pair
    assert run_hook(repo, "notebooks/07_demo.ipynb", "notebooks/helper.py").returncode == 0
    # both sides edited the same way (e.g. Lab with jupytext saved both): nothing to refuse
    add_lab_cell(repo, "same")
    subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--to", "py:percent", "notebooks/07_demo.ipynb"],
                   cwd=repo, check=True)
    assert run_hook(repo).returncode == 0


def test_the_script_runs_as_the_hook_runs_it(repo):
    add_lab_cell(repo, "x")
    edit_py(repo, "y = 2")
    out = subprocess.run([sys.executable, str(HOOK), "notebooks/07_demo.ipynb"], cwd=repo, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1 and "REFUSED" in out.stderr, out


def test_the_pre_commit_hook_runs_this_script_not_jupytext_sync():
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "entry: python scripts/notebook_pairs.py" in config
    assert "entry: jupytext --sync" not in config


def test_no_advice_in_the_repo_reconciles_a_pair_by_modification_time():
    """Every place that tells a person how to bring a pair in line names this script: a message or
    comment saying "run `jupytext --sync`" would lose edits as in case D07 (the newer file wins)."""
    import re

    advice = re.compile(r"(run|then)\W{0,3}`?jupytext --sync", re.IGNORECASE)
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for rel in tracked:
        if rel.endswith((".py", ".md", ".toml", ".yaml", ".sh", ".cfg")) and rel != "tests/test_notebook_pairs.py":
            text = (ROOT / rel).read_text(encoding="utf-8", errors="replace")
            found += [f"{rel}: {m.group(0)}" for m in advice.finditer(text)]
    assert not found, found
