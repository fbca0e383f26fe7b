"""One name for a pretraining run's folder: notebook 02 and ``nbkit.jobs.pretrain`` agree, overrides (also with
a corpus) get a folder of their own, and a bundled run never shares one with a corpus run."""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _store import write_store  # noqa: E402

NB02 = Path(__file__).resolve().parents[1] / "notebooks" / "02_bert_mlm_pretraining.ipynb"
DOCS = ["今天天气很好我们去公园散步", "北京是中国的首都也是文化中心", "这本书写得非常好值得一读",
        "牛奶和面包是早餐", "他们在图书馆里安静地看书"] * 4


def _store(path: Path) -> Path:
    return write_store(path, DOCS, vocab_size=55)


def _notebook_out_dir(**parameters) -> Path:
    """Notebook 02's parameters cell and config cell, run with ``parameters`` as papermill would inject them."""
    code = [c.source for c in nbformat.read(NB02, as_version=4).cells if c.cell_type == "code"]
    ns: dict = {}
    exec(code[0], ns)                       # the parameters cell
    ns.update(parameters)                   # papermill's injected cell
    exec(code[1], ns)                       # PretrainConfig.for_scale(...), out_dir = ...
    return Path(ns["out_dir"])


def _job_out_dir(*flags: str) -> Path:
    from nbkit.jobs import pretrain

    return Path(pretrain.config(pretrain.parser().parse_args(list(flags)))[1])


def test_overrides_with_a_corpus_give_another_folder(runs_tmp, tmp_path):
    from nbkit.recipes import pretraining as pt

    store = _store(tmp_path / "zhnews7")
    plain = pt.PretrainConfig.for_scale("smoke", corpus=str(store)).run_dir()
    tuned = pt.PretrainConfig.for_scale("smoke", corpus=str(store), max_steps=17, lr=0.004).run_dir()
    assert plain == runs_tmp.resolve() / "smoke" / "mlm-zhnews7"          # unchanged without an override
    assert tuned == runs_tmp.resolve() / "smoke" / "mlm-zhnews7-lr0.004-max_steps17"
    # a field the store makes irrelevant (the bundled mix's lines) names no other run
    same = pt.PretrainConfig.for_scale("smoke", corpus=str(store), corpus_lines=77).run_dir()
    assert same == plain


def test_raw_files_name_the_run_by_their_store_not_their_path(runs_tmp, tmp_path):
    from nbkit.corpus.store import store_dir_for
    from nbkit.recipes import pretraining as pt

    deep = tmp_path / ("very_long_folder_name_" * 4) / "notes.txt"
    name = pt.PretrainConfig.for_scale("smoke", corpus=str(deep), seed=4).run_dir().name
    assert name == f"mlm-{store_dir_for(str(deep)).name}-seed4" and len(name) < 80 and "/" not in name


@pytest.mark.parametrize("flags, params", [
    ((), {}),
    (("--seed", "5"), {"seed": 5}),
    (("--max-steps", "9", "--lr", "0.003", "--batch-size", "3"),
     {"max_steps": 9, "overrides": {"lr": 0.003, "batch_size": 3}}),
])
@pytest.mark.parametrize("with_corpus", [False, True], ids=["bundled", "corpus"])
def test_job_and_notebook_name_the_same_folder(runs_tmp, tmp_path, flags, params, with_corpus):
    corpus = {}
    if with_corpus:
        corpus = {"corpus": str(_store(tmp_path / "shelf"))}
        flags = (*flags, "--corpus", corpus["corpus"])
    nb = _notebook_out_dir(scale="smoke", **params, **corpus)
    assert nb == _job_out_dir("--scale", "smoke", *flags)
    assert nb.name.startswith("mlm-shelf" if with_corpus else "mlm") and (params or nb.name in ("mlm", "mlm-shelf"))


def test_a_bundled_run_and_a_corpus_run_never_share_a_folder(runs_tmp, tmp_path):
    from nbkit.recipes import pretraining as pt

    P = pt.PretrainConfig.for_scale
    bundled = {P("smoke", **kw).run_dir() for kw in ({}, {"seed": 3}, {"max_steps": 40}, {"model": "mini"})}
    stores = [_store(tmp_path / n) for n in ("seed3", "max_steps40", "modelmini", "mlm")]
    corpus = {P("smoke", corpus=str(s), **kw).run_dir() for s in stores for kw in ({}, {"seed": 3})}
    assert len(bundled) == 4 and len(corpus) == 8 and not bundled & corpus
    assert P("smoke", corpus=str(stores[0])).run_dir().name == "mlm-corpus-seed3"   # not the bundled -p seed 3
    # the bundled default stays where notebook 03 looks for it
    from nbkit import runs
    assert P("smoke").run_dir() == runs.step_path("smoke", "mlm") == runs_tmp.resolve() / "smoke" / "mlm"


def test_job_help_names_its_default_output_dir(capsys):
    from nbkit.jobs import pretrain

    with pytest.raises(SystemExit):
        pretrain.parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: runs/<scale>/mlm" in text and "mlm-<store name> with --corpus" in text
