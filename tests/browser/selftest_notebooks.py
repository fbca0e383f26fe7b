"""Small notebooks that prove the browser checks can fail (and pass) without nbkit's own notebooks.

Written into the server root at test time (never committed as .ipynb, so nbval
does not collect them):

- ``live.ipynb``: an ipywidgets box updated from a background thread every
  0.2 s while a cell sleeps, and a matplotlib PNG updated in place through
  ``display(..., display_id=True)`` + ``handle.update`` (the pattern of
  ``nbkit.views.plots.LivePlot`` and ``nbkit.GpuMonitor``). The checks must pass.
- ``broken.ipynb``: a widget whose frontend model does not exist (JupyterLab
  shows its "Error displaying widget" box), then a cell that raises, then one
  that Run All never reaches. The widget, error and unrun-cell checks must fire.
  (One notebook for all three: each browser run costs ~20 s on 2 cores.)
"""
from __future__ import annotations

from pathlib import Path

import nbformat

LIVE = [
    "# Live widget and plot",
    """import threading, time
import ipywidgets as w
label = w.Label("tick 0"); bar = w.FloatProgress(value=0, max=50)
box = w.VBox([label, bar])
stop = threading.Event()
def tick():
    i = 0
    while not stop.is_set():
        i += 1; label.value = f"tick {i}"; bar.value = i % 50; time.sleep(0.2)
threading.Thread(target=tick, daemon=True).start()
box""",
    """import io
import matplotlib.pyplot as plt
from IPython.display import Image, display
def png(n):
    fig, ax = plt.subplots(figsize=(4, 3)); ax.plot([k ** 0.5 for k in range(n)])
    buf = io.BytesIO(); fig.savefig(buf, format="png"); plt.close(fig)
    return Image(buf.getvalue())
handle = display(png(2), display_id=True)
for n in range(3, 12):
    time.sleep(0.3); handle.update(png(n))""",
    "time.sleep(2); stop.set(); print('done')",
]
BROKEN = [
    "# Broken widget, then an error",
    """import ipywidgets as w
from traitlets import Unicode
class Broken(w.IntSlider):
    _model_name = Unicode("NoSuchModelOnPurpose").tag(sync=True)
Broken()""",
    "raise RuntimeError('raised on purpose by the browser self-test')",
    "y = 2",
]


def _notebook(cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell(c.lstrip("# ")) if c.startswith("# ") else nbformat.v4.new_code_cell(c)
        for c in cells
    ]
    return nb


def write_selftest_notebooks(directory: Path) -> list[Path]:
    """Write the self-test notebooks into ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cells in [("live", LIVE), ("broken", BROKEN)]:
        path = directory / f"{name}.ipynb"
        nbformat.write(_notebook(cells), path)
        paths.append(path)
    return paths
