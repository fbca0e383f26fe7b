"""Run the guided notebooks headless, in order, keeping the executed copies.

``nbkit run-notebooks`` (and ``scripts/run_notebooks.sh``) is the main job
without a browser: it executes ``notebooks/NN_*.ipynb`` with nbclient in
their own directory, one kernel per notebook, and writes each executed copy
to ``<runs>/<scale>/executed/``. A failing cell stops the run with the
notebook and cell named; the executed copy up to that cell is still saved.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def notebooks_dir() -> Path:
    """The ``notebooks/`` folder: ``$NBKIT_NOTEBOOKS_DIR``, else beside the package, else ``./notebooks``.

    Raises:
        FileNotFoundError: none of those exists.
    """
    candidates = [os.environ.get("NBKIT_NOTEBOOKS_DIR"),
                  Path(__file__).resolve().parents[1] / "notebooks",
                  Path.cwd() / "notebooks"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c).resolve()
    raise FileNotFoundError(
        "no notebooks/ folder found; run from the nbkit checkout or set NBKIT_NOTEBOOKS_DIR"
    )


def select(paths: list[Path], only: list[str] | None) -> list[Path]:
    """Keep the notebooks whose file name starts with one of ``only`` (all when None), sorted."""
    paths = sorted(paths)
    if not only:
        return paths
    chosen = [p for p in paths if any(p.name.startswith(o) for o in only)]
    if not chosen:
        names = ", ".join(p.name for p in paths)
        raise ValueError(f"no notebook matches {only}; available: {names}")
    return chosen


def run_all(scale: str | None = None, only: list[str] | None = None, timeout: int = 3600,
            kernel_name: str = "python3") -> int:
    """Execute the notebooks in order; return 0 when all ran, 1 at the first failure.

    Args:
        scale: ``smoke``, ``cpu`` or ``gpu``; exported as ``NBKIT_SCALE`` for the
            kernels (default: the environment's, see :func:`nbkit.scale.get_scale`).
        only: file-name prefixes (``["01", "02"]``) to run a subset.
        timeout: seconds allowed per cell.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    from nbkit.runs import runs_dir
    from nbkit.scale import get_scale

    preset = get_scale(scale)
    os.environ["NBKIT_SCALE"] = preset.name
    # Kernels run inside notebooks/: pin the runs dir to the caller's choice first.
    os.environ["NBKIT_RUNS_DIR"] = str(runs_dir())
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    out_dir = runs_dir() / preset.name / "executed"
    out_dir.mkdir(parents=True, exist_ok=True)

    src = notebooks_dir()
    todo = select(list(src.glob("[0-9][0-9]_*.ipynb")), only)
    print(f"scale={preset.name}  runs={runs_dir()}  notebooks={len(todo)}", flush=True)
    for path in todo:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": str(src)}})
        t0 = time.perf_counter()
        print(f"  {path.name} ...", end=" ", flush=True)
        try:
            client.execute()
        except (CellExecutionError, DeadKernelError, AssertionError) as exc:
            # AssertionError: nbclient's own cleanup after a dead kernel (km already gone)
            nbformat.write(nb, out_dir / path.name)
            print("FAILED", flush=True)
            what = "the kernel died (out of memory? killed?)" if not isinstance(exc, CellExecutionError) else ""
            print(what or str(exc)[-3000:], file=sys.stderr)
            print(f"executed copy (up to the failing cell): {out_dir / path.name}", file=sys.stderr)
            return 1
        nbformat.write(nb, out_dir / path.name)
        print(f"ok ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"executed copies: {out_dir}")
    return 0
