"""The headline number of each notebook, read back from what it wrote, and the final table.

``nbkit run-notebooks`` ends each notebook with one line and the run with a
table; the numbers come from the artifacts the notebooks save (layout in
:mod:`nbkit.runs`), never from their printed output:

====  ==========================================  ==============================================
 NN    file under ``<runs>/<scale>/``              headline
====  ==========================================  ==============================================
 01    ``tokenizer/stats.json``                    ``unk_rate`` on held-out text, ``vocab_size``
 02    ``mlm/metrics.json``                        ``eval_perplexity`` (held-out), ``steps``
 03    ``sentiment/metrics.json``                  ``test_accuracy`` vs ``baseline_accuracy``
 04    ``profiling/results.json``                  ``step.mfu`` (model FLOPs utilisation), ``step.tokens_per_s``
====  ==========================================  ==============================================

A file older than the notebook's start (left from an earlier run) is not read:
the line says so instead of showing a stale number.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from nbkit.units import fmt_duration

# notebook-name prefix -> (file under <runs>/<scale>/, function of the parsed JSON -> headline)
SOURCES: dict[str, str] = {
    "01": "tokenizer/stats.json",
    "02": "mlm/metrics.json",
    "03": "sentiment/metrics.json",
    "04": "profiling/results.json",
}


def _num(value) -> float | None:
    """A finite float, or None (missing, null, NaN, a string such as "None")."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _tokenizer(d: dict) -> str:
    unk = _num(d.get("unk_rate"))
    vocab = d.get("vocab_size")
    head = f"[UNK] rate {unk:.3%} on held-out text" if unk is not None else "[UNK] rate not recorded"
    return head + (f" (vocabulary {vocab:,})" if isinstance(vocab, int) else "")


def _mlm(d: dict) -> str:
    ppl = _num(d.get("eval_perplexity"))
    head = f"held-out perplexity {ppl:,.1f}" if ppl is not None else "held-out perplexity not recorded"
    return head + (f" after {d['steps']:,} steps" if isinstance(d.get("steps"), int) else "")


def _sentiment(d: dict) -> str:
    acc, base = _num(d.get("test_accuracy")), _num(d.get("baseline_accuracy"))
    if acc is None:
        return "test accuracy not recorded"
    head = f"test accuracy {acc:.3f}"
    if base is None:
        return head
    return f"{head} vs TF-IDF baseline {base:.3f} ({(acc - base) * 100:+.1f} points)"


def _profiling(d: dict) -> str:
    step = d.get("step") or {}
    mfu, tps = _num(step.get("mfu")), _num(step.get("tokens_per_s"))
    rate = f"{tps:,.0f} tokens/s" if tps is not None else None
    if mfu is None:
        where = d.get("device") or "this device"
        head = f"MFU n/a (no known peak FLOP/s for {where})"
    else:
        head = f"MFU {mfu:.1%}"
    return f"{head}, {rate}" if rate else head


READERS = {"01": _tokenizer, "02": _mlm, "03": _sentiment, "04": _profiling}


def headline(notebook: str, scale_dir: Path, since: float | None = None) -> str | None:
    """The headline metric of ``notebook`` (a file name such as ``02_bert_mlm_pretraining.ipynb``).

    Args:
        scale_dir: ``<runs>/<scale>``, where the notebooks write.
        since: the notebook's start (``time.time()``); a file last written before it is
            reported as stale rather than read.

    Returns:
        one short phrase, or None for a notebook without a headline (00). Never raises:
        a missing, stale or unreadable file becomes a phrase saying so.
    """
    prefix = notebook[:2]
    if prefix not in SOURCES:
        return None
    path = Path(scale_dir) / SOURCES[prefix]
    if not path.is_file():
        return f"no {SOURCES[prefix]} written"
    if since is not None and path.stat().st_mtime < since - 1:  # 1 s: coarse file-system clocks
        return f"{SOURCES[prefix]} not rewritten by this run (stale)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{SOURCES[prefix]} unreadable ({type(exc).__name__})"
    if not isinstance(data, dict):
        return f"{SOURCES[prefix]} is not a JSON object"
    return READERS[prefix](data)


@dataclass
class Row:
    """One notebook in the final table: ``status`` is ``ok``, ``FAILED`` or ``not run``; ``wall_s`` in seconds."""

    notebook: str
    status: str
    wall_s: float | None = None
    headline: str | None = None


def table(rows: list[Row]) -> str:
    """The final table as aligned plain text (no colour, no box characters: it goes to logs too).

    The last line totals the wall time of the notebooks that ran.
    """
    head = ("notebook", "status", "wall time", "headline")
    body = [(r.notebook, r.status, fmt_duration(r.wall_s) if r.wall_s is not None else "-", r.headline or "")
            for r in rows]
    total = sum(r.wall_s for r in rows if r.wall_s is not None)
    body.append(("total", "", fmt_duration(total), ""))
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(3)]

    def fmt(line):
        return (f"{line[0]:<{widths[0]}}  {line[1]:<{widths[1]}}  {line[2]:>{widths[2]}}  {line[3]}").rstrip()

    rule = "-" * max(len(fmt(line)) for line in [head, *body])
    return "\n".join([fmt(head), rule, *(fmt(b) for b in body[:-1]), rule, fmt(body[-1])])
