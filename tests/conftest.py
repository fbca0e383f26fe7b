"""Shared pytest setup: offline hub, hardware markers, temporary runs dir, and the split over pytest-xdist workers
(``scripts/test.sh`` runs ``-n 2 --dist loadgroup``)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# Nothing may be downloaded from a model or dataset hub during tests.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_configure(config):
    # a shell starts a background job (`cmd &`, nohup) with SIGINT ignored, and children inherit that: the Ctrl-C
    # tests (in this process and in the jobs they start) need it delivered, as it is to a foreground run
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # each xdist worker gets its own runs dir under the session's: two workers never share a run or store folder
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and os.environ.get("NBKIT_RUNS_DIR"):
        os.environ["NBKIT_RUNS_DIR"] = str(Path(os.environ["NBKIT_RUNS_DIR"]) / worker)


NOTEBOOK_GROUP = "notebooks"   # the notebooks under nbval and the browser suite: one worker, in collection order


def xdist_group_of(nodeid: str) -> str:
    """The worker group of a test: ``notebooks`` for nbval's notebook cells and the browser suite (notebook 03 reads
    the model 02 wrote, and the browser suite drops nbval's run of each notebook it runs), else its file, so module
    fixtures are built once and a file's tests keep their order (what ``--dist loadfile`` does)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(("notebooks/", "tests/browser/")) or path.endswith(".ipynb"):
        return NOTEBOOK_GROUP
    return path


def pytest_xdist_node_collection_finished(node, ids):
    """Stop when a worker's node ids lack xdist's ``@<group>`` suffix: pytest 9.2 ignores xdist's write of it, and
    ``--dist loadgroup`` silently drops the groups (pytest-dev/pytest-xdist#1386)."""
    if ids and node.config.getoption("dist") == "loadgroup" and not any("@" in i.rsplit("]", 1)[-1] for i in ids):
        pytest.exit(f"pytest {pytest.__version__} with this pytest-xdist ignores xdist_group (pytest-dev/pytest-xdist"
                    "#1386), so notebooks and a file's tests would run on both workers: pip install -e '.[test]' "
                    "(it pins pytest<9.2), or pass -n 0", returncode=4)


@pytest.hookimpl(wrapper=True)  # marks before xdist's worker hook reads them
def pytest_collection_modifyitems(config, items):
    grouping = getattr(config.option, "loadgroup", False)          # an xdist worker under --dist loadgroup
    if grouping:
        for item in items:
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item.nodeid)))
        # longest first (test.sh passes --no-loadscope-reorder, which keeps this order): the notebooks, then the
        # files holding slow, multi-process or container tests, so no long group starts last and runs alone at the end
        heavy = {xdist_group_of(i.nodeid) for i in items
                 if any(mark in i.keywords for mark in ("slow", "multiproc", "docker"))}
        items.sort(key=lambda i: (xdist_group_of(i.nodeid) != NOTEBOOK_GROUP, xdist_group_of(i.nodeid) not in heavy))
    yield
    if not _cuda_available():
        skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


@pytest.fixture
def runs_tmp(tmp_path, monkeypatch):
    """Point NBKIT_RUNS_DIR at a fresh temporary directory."""
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


@pytest.fixture(scope="module")
def tiny_task(tmp_path_factory):
    """A 3-class labelled file and a WordPiece tokenizer trained on it: ``(labeled, tokenizer)`` for fine-tuning
    tests (the recipe's stages, LoRA)."""
    import json

    from nbkit import data, text

    root = tmp_path_factory.mktemp("task")
    words = {"好": "很好非常满意推荐", "差": "太差失望退货", "中": "一般还行普通"}
    rows = [{"text": f"{w[i % len(w):]}{w[:i % len(w)]}第{i}次", "label": lab}
            for lab, w in words.items() for i in range(40)]
    path = root / "train.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    labeled = data.load_labeled_files(str(path), seed=0)
    tok = text.train_wordpiece(list(labeled.splits["train"]["text"]), vocab_size=200, out_dir=root / "tok",
                               model_max_length=128)
    return labeled, tok
