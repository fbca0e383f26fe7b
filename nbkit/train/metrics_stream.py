"""Metrics from torchrun workers to the notebook: one ``NBKIT_METRICS {json}`` line per log dict.

Rank 0 prints each log/eval dict as a line (``emit_metrics``, or the ``MetricsPrinter``
loop callback); ``nbkit.train.launch`` reads the workers' output and hands each parsed
dict (``parse_metrics_line``) to its ``on_metrics`` view, e.g. a ``LivePlot``. Kept apart
from the launcher so a worker imports only this (json, sys), not subprocess handling.
"""
from __future__ import annotations

import json
import sys

from nbkit import jsonio

METRICS_PREFIX = "NBKIT_METRICS "


def emit_metrics(metrics: dict, file=None) -> None:
    """Print one metrics line (``NBKIT_METRICS {json}``) and flush; call it on rank 0 only.

    The line is strict JSON (:func:`nbkit.jsonio.dumps`): NaN/inf become ``null``, numpy
    or 0-d tensor numbers plain numbers, anything else JSON cannot encode a string.
    """
    print(METRICS_PREFIX + jsonio.dumps(metrics), file=file or sys.stdout, flush=True)


class MetricsPrinter:
    """Loop callback that prints each log dict as a metrics line (``on_log`` -> ``emit_metrics``).

    Add it to ``Loop(callbacks=[...])`` in job scripts so ``launch`` can plot them; the loop
    calls callbacks on the main process only. Also forwards ``on_evaluate`` metrics, with the
    loop's ``step`` added (a ``LivePlot`` places them on the step axis).
    """

    def on_log(self, loop, logs: dict) -> None:
        emit_metrics(logs)

    def on_evaluate(self, loop, metrics: dict) -> None:
        step = getattr(getattr(loop, "state", None), "step", None)
        emit_metrics({"step": step, **metrics} if step is not None else metrics)


def parse_metrics_line(line: str) -> dict | None:
    """The dict in a metrics line, or ``None`` for any other line (also for malformed JSON).

    Worker output may be prefixed by torchrun (``[rank0]:``), so the prefix is searched
    anywhere in the line.
    """
    i = line.find(METRICS_PREFIX)
    if i < 0:
        return None
    try:
        value = json.loads(line[i + len(METRICS_PREFIX):])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
