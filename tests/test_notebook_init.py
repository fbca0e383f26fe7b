"""Notebooks 02, 03 and 05 and the fine-tuning job from a published checkpoint (``-p init``), at smoke scale
through papermill, on a local stand-in in bert-base-chinese's layout (``nbkit.models.standin``)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _run(papermill, name: str, out: Path, **parameters) -> str:
    papermill.execute_notebook(str(NOTEBOOKS / name), str(out), parameters=parameters, kernel_name="python3",
                               cwd=str(NOTEBOOKS), progress_bar=False)
    cells = json.loads(out.read_text())["cells"]
    return "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


@pytest.mark.slow
def test_notebooks_continue_and_finetune_a_published_checkpoint(tmp_path, monkeypatch, capsys):
    papermill = pytest.importorskip("papermill")
    from transformers import AutoTokenizer

    from nbkit.models.standin import build_standin

    init = build_standin(tmp_path / "bert-base-chinese")
    runs = tmp_path / "runs"
    for k, v in {"NBKIT_RUNS_DIR": str(runs), "NBKIT_SCALE": "smoke", "MPLBACKEND": "Agg",
                 "PYTHONPATH": str(NOTEBOOKS.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")}.items():
        monkeypatch.setenv(k, v)
    text = _run(papermill, "02_bert_mlm_pretraining.ipynb", tmp_path / "02.ipynb", init=str(init))
    [run] = [p for p in (runs / "smoke").iterdir() if p.name.startswith("mlm-from-bert-base-chinese-")]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["init"] == str(init) and metrics["lr"] == 5e-5 and metrics["steps"] == 6
    assert not (runs / "smoke" / "tokenizer").exists()                       # the checkpoint's tokenizer only
    assert "not used by MLM: bert.pooler.dense.bias" in text
    assert "vocabulary 21,128 tokens" in text
    assert "unigram" in text                                                  # the plateau check ran
    assert "The top 5" in text                                                # the fill-mask verdict, on this model
    mark = json.loads((run / "model" / "config.json").read_text())["nbkit_pretraining"]
    assert mark == {"objective": "mlm", "init": str(init)}
    # notebook 03 from the continued model: its tokenizer, mean pooling (nbkit's MLM recipe), a score
    text = _run(papermill, "03_sentiment_finetuning.ipynb", tmp_path / "03.ipynb", init=str(run / "model"))
    assert "mean pooling: pretrained by nbkit's MLM-only recipe" in text
    [ft_run] = [p for p in (runs / "smoke").iterdir() if p.name.startswith("sentiment-from-mlm-from-bert")]
    summary = json.loads((ft_run / "metrics.json").read_text())
    assert 0 <= summary["test_accuracy"] <= 1 and "mlm-from-bert-base-chinese" in summary["init"]
    # the job, from the published checkpoint itself: cls pooling, exported as a plain BertForSequenceClassification
    from nbkit.jobs import finetune

    out = tmp_path / "job"
    assert finetune.main(["--scale", "smoke", "--init", str(init), "--max-steps", "2", "--max-train", "64",
                          "--output-dir", str(out), "--export"]) == 0
    exported = json.loads((out / "model" / "config.json").read_text())
    assert exported["architectures"] == ["BertForSequenceClassification"] and "auto_map" not in exported
    assert AutoTokenizer.from_pretrained(str(out / "model")).get_vocab() == AutoTokenizer.from_pretrained(
        str(init)).get_vocab()
    assert "cls pooling: the checkpoint carries a trained [CLS] pooler" in json.loads(
        (out / "metrics.json").read_text())["init"]
    # notebook 05 on the sample files, continued from the checkpoint: its tokenizer prepares the store
    _run(papermill, "05_your_own_data.ipynb", tmp_path / "05.ipynb", init=str(init), run_name="init")
    own = runs / "smoke" / "own_data" / "init"
    manifest = json.loads((own / "corpus" / "manifest.json").read_text())
    assert manifest["tokenizer"]["vocab_size"] == 21128
    assert json.loads((own / "mlm" / "model" / "config.json").read_text())["nbkit_pretraining"]["init"] == str(init)
