#!/usr/bin/env python3
"""Sync each notebooks/NN_*.ipynb with its Jupytext .py pair by CONTENT since HEAD, never by mtime.

The pre-commit hook `notebook-pairs` (.pre-commit-config.yaml) runs this instead of
`jupytext --sync`, which takes the newer file as the truth: a cell added in JupyterLab to the
.ipynb is silently lost when a `git pull` then brings a newer .py (case D07). Here, for each
pair whose two files hold different cells ("content": type, source, tags; outputs and ids
do not count):

* only one file's cells changed since HEAD -> that file wins: the other is rewritten from it
  (`jupytext --to py:percent X.ipynb`, or `jupytext --update --to ipynb X.py`, which keeps
  the outputs), and the hook fails once so that you review and `git add` the result;
* both changed (or the pair is new, or HEAD itself was out of sync) -> REFUSED: nothing is
  written, the message shows the first differing cell and the command for each choice.

Usage: scripts/notebook_pairs.py [--check] [FILE ...]  (files: any .ipynb/.py of a pair;
none: every pair under notebooks/). --check: report only, write nothing. Exit 0: pairs in
sync; 1: files rewritten (review, `git add`) or a pair refused. Run from the repository root.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

Cell = tuple[str, str, tuple[str, ...]]


def cells_of(text: str, ext: str) -> list[Cell]:
    """What a reviewer sees of each cell of a notebook text (``ext`` ``.ipynb`` or ``.py``): type, source, tags."""
    import jupytext

    nb = jupytext.reads(text, fmt="ipynb" if ext == ".ipynb" else "py:percent")
    return [(c.cell_type, c.source.strip(), tuple(c.metadata.get("tags", ()))) for c in nb.cells]


def at_head(path: Path) -> str | None:
    """``path``'s text in HEAD, or None when HEAD has no such file (or there is no HEAD)."""
    rel = path.resolve().relative_to(repo_root(path))
    got = subprocess.run(["git", "show", f"HEAD:{rel.as_posix()}"], cwd=repo_root(path),
                         capture_output=True, text=True)
    return got.stdout if got.returncode == 0 else None


def repo_root(path: Path) -> Path:
    out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path.resolve().parent,
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def first_difference(a: list[Cell], b: list[Cell]) -> str:
    """``cell 4 (markdown: 'MY NOTES...')``: where two cell lists part, for the message."""
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    def show(cells: list[Cell]) -> str:
        if i >= len(cells):
            return "no cell"
        kind, src, _ = cells[i]
        line = next((ln for ln in src.splitlines() if ln.strip()), "")
        return f"{kind} {line[:60]!r}"
    return f"cell {i + 1} of {len(a)} vs {len(b)}: .ipynb has {show(a)}, .py has {show(b)}"


def decide(ipynb: Path) -> tuple[str, str]:
    """What to do with one pair: ``("ok"|"from_ipynb"|"from_py"|"refuse", reason)``.

    Raises FileNotFoundError when the .py pair is missing.
    """
    py = ipynb.with_suffix(".py")
    now_nb, now_py = cells_of(ipynb.read_text(encoding="utf-8"), ".ipynb"), cells_of(py.read_text(encoding="utf-8"), ".py")
    if now_nb == now_py:
        return "ok", "in sync"
    head_nb, head_py = at_head(ipynb), at_head(py)
    nb_changed = head_nb is None or cells_of(head_nb, ".ipynb") != now_nb
    py_changed = head_py is None or cells_of(head_py, ".py") != now_py
    where = first_difference(now_nb, now_py)
    if nb_changed and not py_changed:
        return "from_ipynb", f"only {ipynb.name} changed since HEAD ({where})"
    if py_changed and not nb_changed:
        return "from_py", f"only {py.name} changed since HEAD ({where})"
    if head_nb is None or head_py is None:
        why = "the pair is not (wholly) in HEAD"
    else:
        why = "both changed since HEAD" if nb_changed else "HEAD itself is out of sync"
    return "refuse", f"{why} and they differ at {where}"


def refusal(ipynb: Path, reason: str) -> str:
    py = ipynb.with_suffix(".py")
    return (f"REFUSED {ipynb} <-> {py.name}: {reason}. Nothing was written; syncing by modification time "
            f"would silently drop one side's edits. Decide which to keep:\n"
            f"  keep the .ipynb (e.g. cells added in JupyterLab): jupytext --to py:percent {ipynb}\n"
            f"  keep the .py (e.g. a change from git):            jupytext --update --to ipynb {py}\n"
            f"  keep both: copy the other side's cells in by hand (`git diff HEAD -- {py}` shows the .py's "
            f"changes), then run one of the two commands and `git add` both files.")


def sync(ipynb: Path, action: str) -> None:
    """Rewrite the other file of the pair from the one that changed (outputs of the .ipynb kept)."""
    from jupytext.cli import jupytext

    args = (["--to", "py:percent", str(ipynb)] if action == "from_ipynb"
            else ["--update", "--to", "ipynb", str(ipynb.with_suffix(".py"))])
    if jupytext(["--quiet", *args]):
        raise SystemExit(f"jupytext {' '.join(args)} failed (see above)")


def pairs(files: list[str], root: Path) -> list[Path]:
    """The .ipynb of each pair named by ``files`` (either side); all notebooks/NN_*.ipynb when none."""
    if not files:
        return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    found = {Path(f).with_suffix(".ipynb") for f in files if Path(f).suffix in (".ipynb", ".py")}
    return sorted(p for p in found if p.is_file() and p.with_suffix(".py").is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--check", action="store_true", help="report only; write nothing")
    args = ap.parse_args(argv)
    rc = 0
    for ipynb in pairs(args.files, Path.cwd()):
        action, reason = decide(ipynb)
        if action == "ok":
            continue
        rc = 1
        if action == "refuse":
            print(refusal(ipynb, reason), file=sys.stderr)
        elif args.check:
            print(f"{ipynb}: out of sync, {reason}; run scripts/notebook_pairs.py {ipynb}", file=sys.stderr)
        else:
            sync(ipynb, action)
            other = ipynb.with_suffix(".py") if action == "from_ipynb" else ipynb
            print(f"{ipynb}: {reason}; rewrote {other} from it: review, then `git add` it", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
