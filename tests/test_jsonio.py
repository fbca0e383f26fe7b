"""C16: every JSON file nbkit writes is strict JSON: no NaN/Infinity, a missing value is null."""
from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from nbkit import jsonio

ROOT = Path(__file__).resolve().parents[1]


def test_loads_strict_rejects_what_strict_parsers_reject():
    assert jsonio.loads_strict('{"a": null}') == {"a": None}
    for bad in ('{"a": NaN}', '[Infinity]', '[-Infinity]'):
        with pytest.raises(ValueError, match="not JSON"):
            jsonio.loads_strict(bad)
    assert "NaN" in json.dumps({"a": math.nan})  # what Python's default writes


def test_non_finite_values_become_null_everywhere_in_the_tree():
    torch = pytest.importorskip("torch")
    payload = {"loss": math.nan, "mfu": math.inf, "neg": -math.inf, "ok": 1.5, "n": 3, "flag": True,
               "np32": np.float32("nan"), "np64": np.float64(2.0), "npint": np.int64(7),
               "arr": np.array([1.0, np.nan]), "t": torch.tensor(float("nan")), "tt": torch.tensor([1.0, 2.0]),
               "nested": ({"x": [math.nan, (math.inf, 1)]},), "path": Path("/tmp/x"), 4: "int key",
               "records": [{"n": 64, "pct_of_peak": float("nan")}]}
    text = jsonio.dumps(payload, indent=1)
    back = jsonio.loads_strict(text)
    assert back["loss"] is None and back["mfu"] is None and back["neg"] is None and back["np32"] is None
    assert back["ok"] == 1.5 and back["n"] == 3 and back["flag"] is True and back["np64"] == 2.0
    assert back["npint"] == 7 and back["arr"] == [1.0, None] and back["t"] is None and back["tt"] == [1.0, 2.0]
    assert back["nested"] == [{"x": [None, [None, 1]]}] and back["path"] == "/tmp/x" and back["4"] == "int key"
    assert back["records"] == [{"n": 64, "pct_of_peak": None}]


def test_every_writer_writes_strict_json(tmp_path):
    from nbkit.jobs.launch import emit_metrics, parse_metrics_line
    from nbkit.jsonio import write_json
    from nbkit.text.tokenizer import save_stats

    write_json(tmp_path / "metrics.json", {"eval_loss": math.nan, "mfu": math.inf, "steps": 3})
    assert jsonio.loads_strict((tmp_path / "metrics.json").read_text()) == {"eval_loss": None, "mfu": None, "steps": 3}
    save_stats({"unk_rate": math.nan, "vocab_size": 10}, tmp_path / "tok")
    assert jsonio.loads_strict((tmp_path / "tok" / "stats.json").read_text())["unk_rate"] is None
    buf = io.StringIO()
    emit_metrics({"step": 1, "loss": math.nan, "lr": np.float32(0.5)}, file=buf)
    line = buf.getvalue().strip()
    assert jsonio.loads_strict(line.split(" ", 1)[1]) == {"step": 1, "loss": None, "lr": 0.5}
    assert parse_metrics_line(line) == {"step": 1, "loss": None, "lr": 0.5}
    assert not list(tmp_path.glob("**/*.tmp"))  # atomic: no temp file left


WRITERS = re.compile(r"\bjson\.dumps?\(")


def test_nothing_writes_json_around_the_helper():
    """The kind, not one file: nbkit, its notebooks, bench and scripts encode JSON only through nbkit.jsonio."""
    files = [p for d in ("nbkit", "notebooks", "bench", "scripts") for p in (ROOT / d).rglob("*.py")]
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.name != "jsonio.py"
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if WRITERS.search(line)]
    assert not offenders, f"use nbkit.jsonio.dumps/write_json (strict JSON, NaN -> null): {offenders}"
