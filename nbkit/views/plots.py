"""LivePlot (train/eval loss, learning rate, throughput on one step axis) and the confusion-matrix plot.

In a notebook the PNG goes to one display handle updated in place (as fastprogress does, no
``clear_output`` flicker), redraws throttled by time; elsewhere one text line. Memory stays flat:
series are decimated to ``max_points`` and the ``Figure`` is made once, outside pyplot.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nbkit.errors import DataError

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

_PANELS = (("loss", ("loss", "eval_loss")), ("learning rate", ("lr",)),
           ("throughput", ("tokens_per_s", "samples_per_s")))


class _Series:
    """(step, value) pairs bounded to ``max_points`` by decimation."""

    def __init__(self, max_points: int):
        self.max_points, self.stride, self.seen = max_points, 1, 0
        self.x: list[float] = []
        self.y: list[float] = []

    def add(self, x: float, y: float) -> None:
        if self.seen % self.stride == 0:
            self.x.append(x)
            self.y.append(y)
            if len(self.x) > self.max_points:
                self.x, self.y = self.x[::2], self.y[::2]
                self.stride *= 2
        self.seen += 1


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return ip is not None and "IPKernelApp" in ip.config
    except Exception:
        return False


class LivePlot:
    """Live curves of ``loss``, ``eval_loss``, ``lr`` and ``tokens_per_s`` (else ``samples_per_s``); a loop
    callback, or call :meth:`update`.

    out_dir: where ``close()`` saves ``loss.png`` (default the loop's ``config.output_dir``).
    min_interval_s: least seconds between redraws. max_overhead: largest share (0-1) of time spent
        drawing. max_points: points kept per series. mode: ``"auto"`` (notebook in a kernel, else
        text), ``"notebook"``, ``"text"`` or ``"none"``. clock: monotonic seconds.

    Raises:
        ConfigError: an unknown ``mode``.
    """

    def __init__(self, out_dir=None, min_interval_s: float = 1.0, max_points: int = 1000, mode: str = "auto",
                 clock=time.monotonic, max_overhead: float = 0.05):
        if mode not in ("auto", "notebook", "text", "none"):
            from nbkit.errors import ConfigError

            raise ConfigError(f"mode={mode!r}; use 'auto', 'notebook', 'text' or 'none'.")
        self.out_dir = Path(out_dir) if out_dir else None
        self.min_interval_s, self.max_points, self.clock = min_interval_s, max_points, clock
        self.max_overhead, self.draw_cost_s = max_overhead, 0.0
        self.mode = ("notebook" if _in_notebook() else "text") if mode == "auto" else mode
        self.series: dict[str, _Series] = {}
        self.last: dict[str, float] = {}
        self.step = self.draws = 0
        self._last_draw: float | None = None
        self._fig = self._lines = self._handle = None
        self.closed = False

    # ----- data ------------------------------------------------------------------------
    def update(self, step: int | dict, /, **metrics) -> None:
        """Record metrics at ``step`` (or one dict with a ``"step"`` key, else the last step, as
        ``nbkit.jobs.launch`` passes them); redraw when :meth:`interval_s` has passed."""
        if isinstance(step, dict):
            metrics = {**step, **metrics}
            step = metrics.pop("step", self.step)
        self.step = step
        for panel in _PANELS:
            for key in panel[1]:
                v = metrics.get(key)
                if isinstance(v, (int, float)):
                    self.series.setdefault(key, _Series(self.max_points)).add(step, float(v))
                    self.last[key] = float(v)
        now = self.clock()
        if self._last_draw is None or now - self._last_draw >= self.interval_s():
            self._last_draw = now
            self._show()
            self.draw_cost_s = self.clock() - now

    def interval_s(self) -> float:
        """Seconds between redraws: ``min_interval_s``, stretched so drawing stays under ``max_overhead``."""
        return max(self.min_interval_s, self.draw_cost_s / self.max_overhead)

    def text(self) -> str:
        """The latest values: ``step 120 | loss 3.2100 | lr 4.00e-04 | tokens/s 12,345``."""
        fmt = {"loss": "loss {:.4f}", "eval_loss": "eval_loss {:.4f}", "lr": "lr {:.2e}",
               "tokens_per_s": "tokens/s {:,.0f}", "samples_per_s": "samples/s {:,.1f}"}
        return " | ".join([f"step {self.step}", *(f.format(self.last[k]) for k, f in fmt.items() if k in self.last)])

    def __repr__(self) -> str:
        n = sum(len(s.x) for s in self.series.values())
        return f"LivePlot({self.text()}, points={n}, draws={self.draws})"

    # ----- rendering -------------------------------------------------------------------
    def figure(self):
        """The ``matplotlib.figure.Figure``, made on first use, with the current data."""
        from matplotlib.figure import Figure

        if self._fig is None:
            from nbkit.views.fonts import use_cjk_font

            use_cjk_font()  # Chinese in titles or labels a user adds renders (warns once without a CJK font)
            self._fig = Figure(figsize=(11, 3.2))  # fixed margins: constrained layout costs ~3x per draw
            self._fig.subplots_adjust(left=0.06, right=0.99, bottom=0.16, top=0.9, wspace=0.3)
            axes = self._fig.subplots(1, len(_PANELS))
            self._lines = {}
            for ax, (title, keys) in zip(axes, _PANELS):
                ax.set_title(title)
                ax.set_xlabel("step")
                ax.grid(alpha=0.3)
                for key in keys:
                    style = {"eval_loss": dict(marker="o", ls="--")}.get(key, {})
                    (self._lines[key],) = ax.plot([], [], label=key, **style)
                if title == "loss":
                    ax.legend(loc="upper right")
        for key, line in self._lines.items():
            s = self.series.get(key)
            if key == "samples_per_s" and "tokens_per_s" in self.series:
                s = None  # one throughput unit per axis: tokens/s when known
            line.set_data(s.x if s else [], s.y if s else [])
            line.set_visible(s is not None)
        unit = "tokens/s" if "tokens_per_s" in self.series else "samples/s"
        self._fig.axes[-1].set_title(f"throughput ({unit})")
        for ax in self._fig.axes:
            ax.relim()
            ax.autoscale_view()
        return self._fig

    def png(self) -> bytes:
        """The figure as PNG bytes (100 dpi)."""
        import io

        buf = io.BytesIO()
        self.figure().savefig(buf, format="png", dpi=100)
        return buf.getvalue()

    def _show(self) -> None:
        self.draws += 1
        if self.mode == "notebook":
            from IPython.display import Image, display

            img = Image(data=self.png(), format="png")
            if self._handle is None:
                self._handle = display(img, display_id=True)
            else:
                self._handle.update(img)
        elif self.mode == "text":
            print(self.text(), flush=True)

    def close(self, out_dir=None) -> Path | None:
        """Final draw, save ``loss.png`` to ``out_dir`` (or the one given before), release the figure;
        the path, or None without a directory or data (and on a second call)."""
        if self.closed:
            return None
        self.closed = True
        out = Path(out_dir) if out_dir else self.out_dir
        path = None
        if self.series:
            self._show()
            if out is not None:
                out.mkdir(parents=True, exist_ok=True)
                path = out / "loss.png"
                self.figure().savefig(path, dpi=100)
        if self._fig is not None:
            self._fig.clear()
        self._fig = self._lines = None
        return path

    # ----- nbkit loop callback ---------------------------------------------------------
    def on_train_begin(self, loop) -> None:
        if self.out_dir is None and loop.config.output_dir is not None:
            self.out_dir = Path(loop.config.output_dir)

    def on_log(self, loop, logs: dict) -> None:
        self.update(logs["step"], **logs)

    def on_evaluate(self, loop, metrics: dict) -> None:
        self.update(loop.state.step, **metrics)

    def on_train_end(self, loop, result) -> None:
        self.close()


def plot_confusion_matrix(cm: Sequence[Sequence[int]], labels: Sequence[str], ax: "Axes | None" = None,
                          title: str | None = None) -> "Axes":
    """Draw ``(K, K)`` counts (rows true, columns predicted) for ``K`` ``labels`` into ``ax`` (default a new
    4x4-inch figure) and return it: colour the % of each true class, so a rare class shows as well,
    text count and %. A CJK font is put first (:func:`~nbkit.views.fonts.use_cjk_font`).

    Raises:
        DataError: ``cm`` is not ``K x K``.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from nbkit.views.fonts import use_cjk_font

    use_cjk_font()
    counts = np.asarray(cm, dtype=float)
    k = len(labels)
    if counts.shape != (k, k):
        raise DataError(f"Confusion matrix of shape {counts.shape} does not match {k} labels; "
                        "pass report['confusion_matrix'] with report['labels'].")
    row_sums = counts.sum(axis=1, keepdims=True)
    share = np.divide(counts, row_sums, out=np.zeros_like(counts), where=row_sums > 0) * 100  # % of true class
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    ax.imshow(share, cmap="Blues", vmin=0, vmax=100)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{int(counts[i, j])}\n{share[i, j]:.1f}%", ha="center", va="center",
                    color="white" if share[i, j] > 50 else "black", fontsize=9)
    ax.set_xticks(range(k), labels=list(labels), rotation=45 if k > 4 else 0)
    ax.set_yticks(range(k), labels=list(labels))
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if title:
        ax.set_title(title)
    return ax
