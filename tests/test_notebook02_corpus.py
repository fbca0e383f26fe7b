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


def _run_notebook02(papermill, tmp_path, monkeypatch, parameters: dict, inject: str | None = None) -> tuple[dict, str]:
    """Notebook 02 at smoke (``inject``: code run right after the parameters cell, as a user edits it there);
    ``(metrics.json of its one run, the printed text)``."""
    import nbformat

    runs = tmp_path / "runs"
    for k, v in {"NBKIT_RUNS_DIR": str(runs), "NBKIT_SCALE": "smoke", "MPLBACKEND": "Agg",
                 "PYTHONPATH": str(NOTEBOOKS.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")}.items():
        monkeypatch.setenv(k, v)
    source = NOTEBOOKS / "02_bert_mlm_pretraining.ipynb"
    if inject is not None:
        nb = nbformat.read(source, as_version=4)
        at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(inject))
        source = tmp_path / "02_edited.ipynb"
        nbformat.write(nb, source)
    papermill.execute_notebook(str(source), str(tmp_path / "out.ipynb"), parameters={**parameters, "max_steps": 6},
                               kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False)
    [metrics] = [json.loads(p.read_text()) for p in (runs / "smoke").glob("mlm-*/metrics.json")]
    cells = json.loads((tmp_path / "out.ipynb").read_text())["cells"]
    return metrics, "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


@pytest.mark.slow
def test_notebook02_pretrains_on_a_wiki_zh_folder_as_shipped(tmp_path, monkeypatch):
    """Extensionless JSON-lines files in AA/, AB/ and a symlinked folder, with MediaWiki markup: no renaming."""
    papermill = pytest.importorskip("papermill")
    from test_corpus_as_shipped import _articles, _jsonl, wiki_folder

    base = _articles(150)      # 2,100 distinct articles: the store holds out 0.5 % of the texts, whole
    arts = [dict(a, id=str(i), text=f"{a['text']}\n第{i}号条目。") for i, a in enumerate(base * 14)]
    root = wiki_folder(tmp_path, {"AA/wiki_00": _jsonl(arts[:900]), "AB/wiki_00": _jsonl(arts[900:1800])},
                       linked=_jsonl(arts[1800:]))
    metrics, text = _run_notebook02(papermill, tmp_path, monkeypatch, {"corpus": str(root)})
    assert metrics["steps"] == 6 and metrics["eval_loss"] > 0
    assert "3 (0 by file name, 3 by content)" in text                        # every file sniffed, the link followed
    assert "elsewhere/AC/wiki_00: jsonl, by content: JSON lines" in text
    [manifest] = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "corpus").glob("wiki_zh-*/manifest.json")]
    assert manifest["repaired"]["markup_stripped"] > 2000 and "[[" not in text and "{{" not in text


@pytest.mark.slow
def test_notebook02_pretrains_on_a_datasets_dataset(tmp_path, monkeypatch):
    """``corpus = load_dataset(...)`` in the parameters cell, as the seeds' idiom has it (a ``datasets.Dataset``)."""
    papermill = pytest.importorskip("papermill")
    texts = [t for t, _ in peoples_daily(300)]
    code = f"import datasets\ncorpus = datasets.Dataset.from_dict({{'text': {texts!r}}})"
    metrics, text = _run_notebook02(papermill, tmp_path, monkeypatch, {}, inject=code)
    assert metrics["steps"] == 6 and metrics["eval_loss"] > 0
    assert "datasets.Dataset(fingerprint=" in text
