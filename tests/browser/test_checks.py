"""The browser suite's verdict logic on hand-made runs (no browser needed, milliseconds)."""
from __future__ import annotations

from labdriver import WIDGET_MIME, RunResult, Sample, changed_in_place, problems

PNG = {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}
WIDGET = {"output_type": "display_data", "data": {WIDGET_MIME: {"model_id": "m1"}, "text/plain": "VBox(children=())"}}


def snap(widgets=(), images=(), **kw):
    base = {"prompts": [], "status": "Python 3 (ipykernel) | Idle", "widgets": list(widgets), "images": list(images),
            "widget_errors": [], "text_plain": [], "tracebacks": []}
    return base | kw


def run(cells, final):
    r = RunResult("nb")
    r.saved = {"cells": cells}
    r.final = final
    return r


def code(outputs=(), n=1, source="x = 1"):
    return {"cell_type": "code", "source": source, "execution_count": n, "outputs": list(outputs)}


def test_clean_run_has_no_problems():
    r = run([code([WIDGET]), code([PNG], 2)], snap(widgets=["tick 3|"], images=[{"hash": "1:5", "width": 400}]))
    assert problems(r) == []


def test_error_output_and_unrun_cell_are_problems():
    err = {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": []}
    r = run([code([err]), code(n=None, source="y = 2"), code(n=None, source="")], snap())
    assert problems(r) == ["cell 0: ValueError: bad", "cell 1 did not run (Run All stops at the first error)"]


def test_widget_text_fallback_and_missing_render_are_problems():
    r = run([code([WIDGET])], snap(text_plain=["VBox(children=(Label(value='n=1'),))", "42"]))
    found = problems(r)
    assert any(p.startswith("widget shown as text fallback") for p in found)
    assert "1 widget outputs in the notebook but 0 rendered as widgets" in found
    assert len(found) == 2  # "42" is an ordinary result, not a widget repr


def test_error_box_and_unloaded_image_are_problems():
    r = run([code([PNG])], snap(widget_errors=["Click to show javascript error."], images=[{"hash": "1:5", "width": 0}]))
    assert len(problems(r)) == 2


def test_changed_in_place_needs_a_busy_change_at_the_same_position():
    samples = [
        Sample(0.0, True, snap(widgets=["a"])),
        Sample(0.3, True, snap(widgets=["a", "x"])),  # a new widget appears: not an update
        Sample(0.6, False, snap(widgets=["b", "x"])),  # changed, but no cell was running
    ]
    assert changed_in_place(samples, "widgets") == []
    samples.append(Sample(0.9, True, snap(widgets=["a", "y"])))
    assert changed_in_place(samples, "widgets") == [1]
