import gc
import tracemalloc
import weakref

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from nbkit.errors import ConfigError
from nbkit.views.plots import LivePlot


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_redraws_are_throttled_by_time_plus_a_final_draw(tmp_path, capsys):
    clock = FakeClock()
    plot = LivePlot(out_dir=tmp_path, min_interval_s=1.0, mode="text", clock=clock)
    for step in range(1, 51):            # 50 updates, 0.1 s apart = 5 s
        plot.update(step, loss=1.0 / step, lr=1e-3, tokens_per_s=1000.0)
        clock.t += 0.1
    assert plot.draws == 5               # t = 0, 1, 2, 3, 4 (float steps of 0.1)
    assert len(capsys.readouterr().out.strip().splitlines()) == 5
    path = plot.close()
    assert plot.draws == 6 and path == tmp_path / "loss.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.close() is None          # idempotent


def test_slow_draws_stretch_the_interval_to_bound_overhead(monkeypatch):
    clock = FakeClock()
    plot = LivePlot(mode="text", min_interval_s=1.0, max_overhead=0.05, clock=clock)

    def slow_show():                     # each draw costs 0.5 s of (fake) wall time
        plot.draws += 1
        clock.t += 0.5

    monkeypatch.setattr(plot, "_show", slow_show)
    for step in range(1, 301):           # 300 updates, 0.1 s apart = 30 s of training
        plot.update(step, loss=1.0)
        clock.t += 0.1
    assert plot.interval_s() == pytest.approx(10.0)   # 0.5 s / 5 %
    assert plot.draws == 4               # t = 0, 10.5, 21, 31.5: not one per second
    assert (plot.draws - 1) * 0.5 / clock.t <= 0.05   # after the first (unthrottled) draw


def test_text_line_and_repr_are_stable():
    plot = LivePlot(mode="none", clock=FakeClock())
    plot.update(120, loss=3.21, eval_loss=3.4, lr=4e-4, tokens_per_s=12345.6, grad_norm=1.0)
    assert plot.text() == "step 120 | loss 3.2100 | eval_loss 3.4000 | lr 4.00e-04 | tokens/s 12,346"
    assert repr(plot) == f"LivePlot({plot.text()}, points=4, draws=1)"


def test_notebook_mode_updates_one_display_handle_in_place(monkeypatch):
    import IPython.display

    calls = []

    class Handle:
        def update(self, obj):
            calls.append(("update", obj))

    def fake_display(obj, display_id=None):
        calls.append(("display", obj))
        return Handle()
    monkeypatch.setattr(IPython.display, "display", fake_display)
    clock = FakeClock()
    plot = LivePlot(mode="notebook", min_interval_s=1.0, clock=clock)
    for step in range(12):
        plot.update(step, loss=1.0, lr=1e-3, samples_per_s=10.0)
        clock.t += 0.5
    plot.close()
    kinds = [k for k, _ in calls]
    assert kinds[0] == "display" and set(kinds[1:]) == {"update"} and len(kinds) == 6 + 1
    assert calls[-1][1].data[:4] == b"\x89PNG"
    assert plt.get_fignums() == []       # nothing registered with pyplot


def test_memory_and_points_stay_flat_over_10000_updates():
    plot = LivePlot(mode="none", max_points=500, clock=FakeClock())
    for step in range(1000):
        plot.update(step, loss=1.0, eval_loss=1.0, lr=1e-3, tokens_per_s=1.0)
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    for step in range(1000, 10000):
        plot.update(step, loss=1.0, eval_loss=1.0, lr=1e-3, tokens_per_s=1.0)
    grown, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert all(len(s.x) <= 501 for s in plot.series.values())
    assert plot.series["loss"].x[-1] >= 9000  # recent history is kept
    assert grown - base < 100_000             # bytes; unbounded lists would grow ~1 MB


def test_one_figure_per_run_and_released_at_close(tmp_path):
    plot = LivePlot(out_dir=tmp_path, mode="none", min_interval_s=0.0, clock=FakeClock())
    plot.update(1, loss=1.0)
    fig = plot.figure()
    plot.update(2, loss=0.5)
    assert plot.figure() is fig and isinstance(fig, Figure)
    ref = weakref.ref(fig)
    del fig
    plot.close()
    gc.collect()
    assert ref() is None and plt.get_fignums() == []


def test_unknown_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="'text'"):
        LivePlot(mode="gui")
