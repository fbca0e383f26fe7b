"""Notebook 05 with ``corpus_file`` set to a small generated ``.jsonl``, at smoke scale, through papermill.

The corpus holds every labelled text too, so the exclusion of the validation/test texts is visible
in the store's manifest; the store's tokenizer must be the one fine-tuned and exported.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import texts as peoples_daily_texts  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
def test_notebook05_pretrains_from_a_prepared_store(tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    import pandas as pd

    reviews = pd.read_csv(NOTEBOOKS / "data" / "sample_reviews.csv")["review"].tolist()
    corpus = tmp_path / "mine.jsonl"
    corpus.write_text("".join(json.dumps({"body": t}, ensure_ascii=False) + "\n"
                              for t in peoples_daily_texts(300) + reviews), encoding="utf-8")
    runs = tmp_path / "runs"
    for k, v in {"NBKIT_RUNS_DIR": str(runs), "NBKIT_SCALE": "smoke", "MPLBACKEND": "Agg",
                 "PYTHONPATH": str(NOTEBOOKS.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")}.items():
        monkeypatch.setenv(k, v)
    params = {"corpus_file": str(corpus), "corpus_text_column": "body", "run_name": "jl"}
    papermill.execute_notebook(str(NOTEBOOKS / "05_your_own_data.ipynb"), str(tmp_path / "out.ipynb"),
                               parameters=params, kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False)
    run_dir = runs / "smoke" / "own_data" / "jl"
    manifest = json.loads((run_dir / "corpus" / "manifest.json").read_text(encoding="utf-8"))
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    # every validation/test text was in the corpus once (at least): all of them dropped
    assert manifest["dropped"]["excluded"] >= metrics["n_val"] + metrics["n_test"] > 0
    assert manifest["settings"]["exclude_texts"]["n_hashes"] == metrics["n_val"] + metrics["n_test"]
    assert [Path(s["path"]).name for s in manifest["sources"]] == ["mine.jsonl", "labeled_train.jsonl"]
    assert manifest["splits"]["validation"]["n_docs"] > 0
    assert not (run_dir / "tokenizer").exists()                      # no second tokenizer trained
    store_vocab = (run_dir / "corpus" / "tokenizer" / "vocab.txt").read_text(encoding="utf-8")
    assert (run_dir / "model" / "vocab.txt").read_text(encoding="utf-8") == store_vocab
    assert json.loads((run_dir / "mlm" / "metrics.json").read_text())["eval_loss"] > 0
    # a second run reuses the finished store (its manifest is not rewritten)
    stamp = (run_dir / "corpus" / "manifest.json").stat().st_mtime_ns
    from nbkit.data import load_labeled_files
    from nbkit.recipes import own_data as own

    labeled = load_labeled_files(str(NOTEBOOKS / "data" / "sample_reviews.csv"), text_column="review",
                                 label_column="label", seed=0)
    cfg = own.OwnDataConfig.for_scale("smoke", corpus_file=str(corpus), corpus_text_column="body", run_name="jl")
    own.corpus_store(cfg, labeled, run_dir / "corpus", progress=False)
    assert (run_dir / "corpus" / "manifest.json").stat().st_mtime_ns == stamp
