"""Notebook 02 with ``corpus`` set to a tiny prepared store and one override, at smoke scale, through papermill."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import peoples_daily  # noqa: E402
from _store import write_store  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
def test_notebook02_pretrains_from_a_store(tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    store = write_store(tmp_path / "mystore", [list(w) for _, w in peoples_daily(200)])
    runs = tmp_path / "runs"
    for k, v in {"NBKIT_RUNS_DIR": str(runs), "NBKIT_SCALE": "smoke", "MPLBACKEND": "Agg",
                 "PYTHONPATH": str(NOTEBOOKS.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")}.items():
        monkeypatch.setenv(k, v)
    papermill.execute_notebook(str(NOTEBOOKS / "02_bert_mlm_pretraining.ipynb"), str(tmp_path / "out.ipynb"),
                               parameters={"corpus": str(store), "max_steps": 6}, kernel_name="python3",
                               cwd=str(NOTEBOOKS), progress_bar=False)
    # the override names its own folder: it neither resumes nor overwrites the run of the store alone (mlm-mystore)
    metrics = json.loads((runs / "smoke" / "mlm-mystore-max_steps6" / "metrics.json").read_text())
    assert not (runs / "smoke" / "mlm-mystore").exists()
    assert metrics["steps"] == 6 and metrics["eval_loss"] > 0              # smoke keeps its other sizes
    assert not (runs / "smoke" / "tokenizer").exists()                      # the store's tokenizer was used
    cells = json.loads((tmp_path / "out.ipynb").read_text())["cells"]
    text = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    assert "run sized for the corpus" in text and "not applied" in text
