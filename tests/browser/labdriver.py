"""Drive a notebook through the JupyterLab UI with Playwright and record what it shows.

`run_notebook` opens one notebook in its own browser context and workspace,
waits for the status bar's kernel text to read "Idle" (the toolbar indicator
says idle before the kernel exists), clicks Run > Run All Cells, and polls the
DOM every `POLL_S` seconds until no code cell is queued or running. Each poll
records a `Sample`: the code-cell prompts, the visible state of every rendered
ipywidget and a hash of every output image, so tests can assert that a widget
or a plot *changed while a cell ran*. After the run it saves the notebook
(Ctrl+S) and reads it back through the contents API, which says exactly which
outputs are errors, widgets and images; the checks in `problems()` compare that
with what the DOM shows.
"""
from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 0.25
STILL_S = 3.0   # how long a probe cell watches a stopped widget stay still: 15 ticks of the self-test's 0.2 s thread
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml")
# ipywidgets' plain-text repr, shown when the widget manager is missing:
# "IntSlider(value=3)", "VBox(children=(Label(value='n=1'), ...))", "GpuMonitor(...)".
WIDGET_REPR = re.compile(r"^[A-Z]\w*\((children|value|layout|description|style|max|min|options)=")

# One evaluate() per poll; returns plain JSON.
SNAPSHOT_JS = r"""
() => {
  const hash = s => { let x = 0; for (let i = 0; i < s.length; i++) x = (x * 31 + s.charCodeAt(i)) | 0; return x + ':' + s.length; };
  const outs = [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')];
  const widgetOuts = outs.filter(o => o.querySelector(':scope > .jupyter-widgets'));
  const widgetState = o => o.innerText + '|' + [...o.querySelectorAll('[aria-valuenow], .progress-bar, input, textarea')]
      .map(e => e.getAttribute('aria-valuenow') || e.style.width || e.value).join(',');
  const status = [...document.querySelectorAll('.jp-StatusBar-TextItem')].map(e => e.textContent.trim())
      .find(t => /\|\s*(Idle|Busy|Starting|Restarting|Connecting|Unknown|Dead|No Kernel|Initializing|Disconnected)/i.test(t)) || '';
  return {
    prompts: [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim()),
    status: status,
    widgets: widgetOuts.map(widgetState),
    widget_errors: outs.filter(o => o.querySelector('.jupyter-widgets-error-widget') || /Error displaying widget|Loading widget\.\.\./.test(o.innerText))
      .map(o => o.innerText.trim().slice(0, 200) || 'error widget'),
    text_plain: outs.filter(o => o.getAttribute('data-mime-type') === 'text/plain').map(o => o.innerText.trim()),
    tracebacks: outs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr'
      && /Traceback \(most recent call last\)|^\s*Cell In\[\d+\]/m.test(o.innerText)).map(o => o.innerText.slice(0, 500)),
    images: [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output img')]
      .map(i => ({hash: hash(i.src), width: i.naturalWidth, complete: i.complete})),
  };
}
"""


@dataclass
class Sample:
    """The DOM at one instant: ``t`` seconds since Run All, ``busy`` if a cell was queued/running."""

    t: float
    busy: bool
    snap: dict


@dataclass
class RunResult:
    """What one notebook run showed. Times in seconds."""

    name: str
    open_s: float = 0.0  # page load until the kernel reads Idle
    run_s: float = 0.0  # Run All until no cell is queued or running
    samples: list[Sample] = field(default_factory=list, repr=False)
    probe_samples: list[Sample] = field(default_factory=list, repr=False)  # while an appended sleep cell ran
    final: dict = field(default_factory=dict, repr=False)  # last snapshot, after the run
    saved: dict = field(default_factory=dict, repr=False)  # notebook JSON as saved by the frontend
    screenshot: Path | None = None
    extra_shots: dict[str, Path] = field(default_factory=dict)

    def code_cells(self) -> list[dict]:
        return [c for c in self.saved.get("cells", []) if c["cell_type"] == "code"]

    def outputs(self) -> list[dict]:
        return [o for c in self.code_cells() for o in c.get("outputs", [])]

    def has_widgets(self) -> bool:
        return any(WIDGET_MIME in o.get("data", {}) for o in self.outputs())

    def has_images(self) -> bool:
        return any(m in o.get("data", {}) for o in self.outputs() for m in IMAGE_MIMES)

    def cell_index(self, pattern: str, mime: str = "image/png") -> int | None:
        """Index (among all cells) of the first code cell that shows ``mime`` and whose source,
        or the markdown cell just before it, matches ``pattern`` (case-insensitive)."""
        cells = self.saved.get("cells", [])
        for i, c in enumerate(cells):
            if c["cell_type"] != "code" or not any(mime in o.get("data", {}) for o in c.get("outputs", [])):
                continue
            before = cells[i - 1]["source"] if i and cells[i - 1]["cell_type"] == "markdown" else ""
            if re.search(pattern, c.get("source", ""), re.I) or re.search(pattern, before, re.I):
                return i
        return None


def problems(result: RunResult) -> list[str]:
    """Everything wrong with a finished run, as readable lines (empty = clean).

    Covers: error outputs in the saved notebook, tracebacks shown in the DOM,
    code cells left unrun (Run All stops at the first error), widgets that show
    "Error displaying widget"/"Loading widget..." or their text fallback, fewer
    rendered widgets than the kernel displayed, and images that did not load.
    """
    out = []
    for i, c in enumerate(result.code_cells()):
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
        if c.get("execution_count") is None and c.get("source", "").strip():
            out.append(f"cell {i} did not run (Run All stops at the first error)")
    f = result.final
    out += [f"traceback shown: {t!r}" for t in f.get("tracebacks", [])]
    out += [f"widget failed to render (error box or 'Loading widget...'): {t!r}" for t in f.get("widget_errors", [])]
    out += [f"widget shown as text fallback: {t[:120]!r}" for t in f.get("text_plain", []) if WIDGET_REPR.match(t)]
    n_saved = sum(WIDGET_MIME in o.get("data", {}) for o in result.outputs())
    if len(f.get("widgets", [])) < n_saved:
        out.append(f"{n_saved} widget outputs in the notebook but {len(f.get('widgets', []))} rendered as widgets")
    out += [f"image {i} did not load" for i, im in enumerate(f.get("images", [])) if not im["width"]]
    return out


def _status_idle(snap: dict) -> bool:
    return bool(re.search(r"\|\s*Idle\s*$", snap["status"]))


def open_notebook(page, server, path: str, timeout_s: float = 120.0) -> float:
    """Open ``path`` (relative to the server root) in a fresh workspace; wait for an idle kernel.

    Returns seconds taken. Raises ``TimeoutError`` with the status bar text.
    """
    t0 = time.monotonic()
    workspace = re.sub(r"\W", "-", path)
    page.goto(server.url(f"lab/workspaces/{workspace}/tree/{path}?reset"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout_s * 1000)
    while time.monotonic() - t0 < timeout_s:
        if _status_idle(page.evaluate(SNAPSHOT_JS)):
            return time.monotonic() - t0
        time.sleep(POLL_S)
    raise TimeoutError(f"kernel of {path} not idle after {timeout_s:.0f} s: {page.evaluate(SNAPSHOT_JS)['status']!r}")


def run_all(page, result: RunResult, timeout_s: float, start_timeout_s: float = 120.0, on_sample=None) -> None:
    """Click Run > Run All Cells and sample the DOM until the kernel is idle again.

    Fails fast (``TimeoutError``) if no cell starts within ``start_timeout_s``.
    ``on_sample(sample)`` is called after each poll (used for mid-run screenshots).
    """
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).first.click()
    t0 = time.monotonic()
    started = False
    idle_polls = 0
    while True:
        t = time.monotonic() - t0
        snap = page.evaluate(SNAPSHOT_JS)
        busy = any(p.startswith("[*]") for p in snap["prompts"])
        ran = any(re.match(r"\[\d+\]", p) for p in snap["prompts"])
        started = started or busy or ran
        s = Sample(t, busy, snap)
        result.samples.append(s)
        if on_sample is not None:
            on_sample(s)
        if started and not busy and _status_idle(snap):
            idle_polls += 1
            if idle_polls >= 2:  # idle twice in a row: not a gap between two cells
                break
        else:
            idle_polls = 0
        if not started and t > start_timeout_s:
            dialog = page.locator(".jp-Dialog").all_inner_texts()  # e.g. "Select Kernel"
            raise TimeoutError(
                f"Run All: no cell started within {start_timeout_s:.0f} s (status {snap['status']!r}, dialog {dialog})"
            )
        if t > timeout_s:
            raise TimeoutError(f"Run All: still running after {timeout_s:.0f} s (prompts {snap['prompts']})")
        time.sleep(POLL_S)
    result.run_s = time.monotonic() - t0


def save_and_read(page, server, path: str, timeout_s: float = 60.0) -> dict:
    """Save the notebook from the UI and return the JSON the server stored.

    Presses Ctrl+S and waits for the file's ``last_modified`` (contents API) to
    change; if it does not within ``timeout_s``, tries File > Save Notebook.
    Raises ``TimeoutError`` if neither saved (reading the old file would report
    every cell as unrun).
    """

    def model(content: bool) -> dict:
        url = server.url(f"api/contents/{path}?type=notebook&content={int(content)}")
        with urllib.request.urlopen(url, timeout=20) as r:
            return json.load(r)

    before = model(False)["last_modified"]

    def saved() -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if model(False)["last_modified"] != before:
                return True
            time.sleep(POLL_S)
        return False

    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    if not saved():
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).first.click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Save Notebook$")).first.click()
        if not saved():
            raise TimeoutError(f"could not save {path} from the UI (Ctrl+S, then File > Save Notebook)")
    return model(True)["content"]


def shutdown_kernels(server) -> None:
    """Shut every session down through the REST API (frees the 2 CPU cores for the next notebook)."""
    with urllib.request.urlopen(server.url("api/sessions"), timeout=10) as r:
        sessions = json.load(r)
    for s in sessions:
        req = urllib.request.Request(server.url(f"api/sessions/{s['id']}"), method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()


def screenshot_whole_notebook(page, path: Path, width: int = 1280, max_height: int = 12000) -> Path:
    """Grow the viewport to the notebook's height and take one screenshot of it all."""
    height = page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('.jp-NotebookPanel-notebook, .jp-WindowedPanel-outer')]"
        ".map(e => e.scrollHeight), 0)"
    )
    page.set_viewport_size({"width": width, "height": int(min(max(800, height + 200), max_height))})
    page.wait_for_timeout(300)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    return path


def changed_in_place(samples: list[Sample], key: str) -> list[int]:
    """Indices of ``widgets``/``images`` whose state changed between samples taken while busy.

    Only busy samples count (a cell was queued or running), and an element is
    compared with itself by position, so a new output appearing is not an update.
    """
    seen: dict[int, set[str]] = {}
    for s in samples:
        if s.busy:
            for i, v in enumerate(s.snap[key]):
                seen.setdefault(i, set()).add(json.dumps(v, sort_keys=True))
    return sorted(i for i, vals in seen.items() if len(vals) > 1)


def run_probe_cell(page, result: RunResult, seconds: float) -> None:
    """Append a code cell that sleeps ``seconds`` through the UI, run it, and sample the DOM meanwhile.

    Shows whether a widget still updates after the notebook's own cells ended (a negative check needs a window:
    nothing must change within it). Samples go to ``result.probe_samples``. Raises ``TimeoutError`` if the cell
    is still running ``seconds + 60`` s after it was started.
    """
    page.locator(".jp-Notebook .jp-Cell").last.click(position={"x": 5, "y": 5})
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # insert a cell below, in command mode
    page.keyboard.press("Enter")  # edit it
    page.keyboard.type(f"import time; time.sleep({seconds:g})")
    page.keyboard.press("Shift+Enter")
    t0 = time.monotonic()
    idle_polls = 0
    while time.monotonic() - t0 < seconds + 60:
        snap = page.evaluate(SNAPSHOT_JS)
        busy = any(p.startswith("[*]") for p in snap["prompts"])
        result.probe_samples.append(Sample(time.monotonic() - t0, busy, snap))
        idle_polls = idle_polls + 1 if (not busy and _status_idle(snap) and time.monotonic() - t0 > 1) else 0
        if idle_polls >= 2:
            return
        time.sleep(POLL_S)
    raise TimeoutError(f"probe cell still running after {seconds + 60:.0f} s")


def screenshot_output_of(page, cell_index: int, path: Path) -> Path:
    """Screenshot the last image in the output of the ``cell_index``-th cell (all cells counted, as in
    the .ipynb), or its whole output area if it shows no image."""
    area = page.locator(".jp-Notebook .jp-Cell").nth(cell_index).locator(".jp-OutputArea")
    if area.locator("img").count():
        area = area.locator("img").last
    area.scroll_into_view_if_needed()
    path.parent.mkdir(parents=True, exist_ok=True)
    area.screenshot(path=str(path))
    return path
