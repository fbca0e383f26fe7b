"""JupyterLab in headless Chromium: the server nbkit ships, its notebooks, live widgets and plots.

Run alone with ``pytest -m browser tests/browser`` (needs scripts/browser_deps.sh).
Every notebook in ``notebooks/`` is opened through the UI at smoke scale and run
with Run > Run All Cells; see labdriver.py for how runs are observed. The
self-test notebooks (selftest_notebooks.py) prove each check can go red.
"""
from __future__ import annotations

import re

import pytest
from labdriver import STILL_S, changed_in_place, problems
from labserver import REPO

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))


def _notebook(prefix: str) -> str:
    """``notebooks/<prefix>_*.ipynb`` relative to the server root, or skip with the reason."""
    found = [n for n in NOTEBOOKS if n.startswith(prefix + "_")]
    if not found:
        pytest.skip(f"notebooks/{prefix}_*.ipynb does not exist yet")
    return f"notebooks/{found[0]}"


def _report(result) -> str:
    return f"{result.name}: open {result.open_s:.1f} s, run all {result.run_s:.1f} s, {len(result.samples)} samples"


# --- the server and its login -------------------------------------------------------------


def test_without_token_shows_login_not_notebooks(page, lab_server):
    page.goto(lab_server.url("lab", token=False))
    page.wait_for_load_state("domcontentloaded")
    assert "/login" in page.url
    assert page.locator("#password_input").is_visible()  # "Password or token"
    page.wait_for_timeout(500)
    assert page.locator("#jp-main-dock-panel, .jp-DirListing, .jp-Notebook").count() == 0
    # The API refuses too.
    response = page.request.get(lab_server.url("api/contents/notebooks", token=False))
    assert response.status == 403


def test_with_token_shows_lab_and_notebooks(page, lab_server):
    page.goto(lab_server.url("lab/tree/notebooks"))
    page.wait_for_selector(".jp-DirListing-content", timeout=60_000)
    assert "/login" not in page.url
    listing = page.locator(".jp-DirListing-itemName")
    if NOTEBOOKS:
        listing.first.wait_for(timeout=30_000)
    names = set(listing.all_inner_texts())
    assert set(NOTEBOOKS) <= names, f"file browser shows {sorted(names)}"


# --- nbkit's notebooks --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", NOTEBOOKS or [pytest.param("none", marks=pytest.mark.skip(reason="notebooks/ has no notebooks yet"))]
)
def test_notebook_runs_clean_in_the_browser(run_notebook, name):
    """Run All at smoke scale: no error, every cell ran, widgets and images rendered."""
    result = run_notebook(f"notebooks/{name}")
    print(_report(result))
    assert not problems(result), "\n".join(problems(result))


def test_gpu_monitor_widget_renders_and_updates(run_notebook):
    """Notebook 00: the GpuMonitor is a live widget, not an error box or its text repr."""
    result = run_notebook(_notebook("00"))
    assert result.has_widgets(), "notebook 00 displayed no ipywidget (expected nbkit.GpuMonitor)"
    assert result.final["widgets"], "no widget rendered in the DOM"
    assert not [p for p in problems(result) if "widget" in p], problems(result)
    assert changed_in_place(result.samples, "widgets"), (
        "no widget changed while a cell ran (DOM sampled every 0.25 s during Run All, "
        f"{sum(s.busy for s in result.samples)} busy samples; the monitor samples every second while the "
        f"'Watch it move' cell keeps the devices busy); last widget states: {result.final['widgets']}"
    )


def test_live_loss_plot_renders_and_changes_during_training(run_notebook):
    """Notebook 02: LivePlot's PNG is shown as an image and is replaced in place while training runs."""
    result = run_notebook(_notebook("02"))
    images = result.final["images"]
    assert images and all(im["width"] > 0 for im in images), f"images in the DOM: {images}"
    assert changed_in_place(result.samples, "images"), (
        f"no output image changed in place while a cell ran ({sum(s.busy for s in result.samples)} busy samples, "
        "every 0.25 s): LivePlot must display once and update its display handle during training"
    )


# --- self-tests: the checks above can go red ----------------------------------------------


def test_selftest_live_widget_and_plot_pass(run_notebook):
    result = run_notebook("selftest/live.ipynb", still_s=STILL_S)
    print(_report(result))
    assert not problems(result), problems(result)
    assert changed_in_place(result.samples, "widgets") == [0]
    assert changed_in_place(result.samples, "images") == [0]
    assert changed_in_place(result.probe_samples, "widgets") == [], "the thread stopped; nothing may change"


def test_selftest_broken_widget_error_and_unrun_cell_are_detected(run_notebook):
    found = problems(run_notebook("selftest/broken.ipynb"))
    assert any(p.startswith("widget failed to render") for p in found), found
    assert any("RuntimeError: raised on purpose" in p for p in found), found
    assert any(p.startswith("traceback shown") for p in found), found
    assert any(re.match(r"cell 2 did not run", p) for p in found), found
