"""Corpus mixing: dedup across sources, held-out texts excluded, weights, report."""
import datasets
import pytest

from nbkit.data import load_sentiment
from nbkit.data.mix import mix_corpora
from nbkit.errors import ConfigError, DataError


def test_dedup_across_sources_first_source_wins_and_report():
    mixed = mix_corpora({"news": ["甲 乙", "丙", "丙", "  "], "reviews": ["甲  乙", "丁"]}, seed=1)
    r = mixed.report
    assert r["news"] == {"n_in": 4, "n_blank": 1, "n_excluded": 0, "n_duplicates": 1, "n_kept": 2, "weight": 1.0,
                         "n_out": 2, "chars_out": 4, "char_share": 0.8}
    assert r["reviews"]["n_duplicates"] == 1 and r["reviews"]["n_kept"] == 1     # "甲  乙" == "甲 乙" normalised
    assert sorted(zip(mixed.dataset["source"], mixed.dataset["text"])) == [("news", "丙"), ("news", "甲 乙"),
                                                                         ("reviews", "丁")]
    assert r["n_out"] == 3 and r["chars_out"] == 5
    assert list(mixed.table().index) == ["news", "reviews"]


def test_weights_repeat_and_subsample_deterministically():
    texts = [f"文本{i}" for i in range(10)]
    a = mix_corpora({"a": texts, "b": [f"评论{i}" for i in range(10)]}, {"a": 2, "b": 0.5}, seed=3)
    assert a.report["a"]["n_out"] == 20 and a.report["b"]["n_out"] == 5
    assert a.dataset["text"] == mix_corpora({"a": texts, "b": [f"评论{i}" for i in range(10)]},
                                            {"a": 2, "b": 0.5}, seed=3).dataset["text"]
    assert mix_corpora({"a": texts, "b": ["x"]}, {"b": 0}).report["b"]["n_out"] == 0


def test_no_validation_or_test_review_in_the_pretraining_mix():
    sentiment = load_sentiment(seed=0, max_train=400)
    held_out = list(sentiment.splits["validation"]["text"]) + list(sentiment.splits["test"]["text"])
    # a corpus that (wrongly) holds every review, held-out ones included
    leaky = list(sentiment.splits["train"]["text"]) + held_out
    mixed = mix_corpora({"reviews": leaky}, exclude=held_out)
    assert mixed.report["reviews"]["n_excluded"] == len(set(held_out))
    assert not set(mixed.dataset["text"]) & set(held_out)


def test_words_kept_where_given_and_empty_elsewhere():
    pd = datasets.Dataset.from_dict({"text": ["北京天安门"], "words": [["北京", "天安门"]]})
    mixed = mix_corpora({"pd": pd, "reviews": ["很好"]})
    rows = dict(zip(mixed.dataset["text"], mixed.dataset["words"]))
    assert rows == {"北京天安门": ["北京", "天安门"], "很好": []}


def test_bad_arguments():
    with pytest.raises(ConfigError, match="unknown sources"):
        mix_corpora({"a": ["x"]}, {"b": 1})
    with pytest.raises(ConfigError, match="finite number >= 0"):
        mix_corpora({"a": ["x"]}, {"a": -1})
    with pytest.raises(ConfigError, match="not one string"):
        mix_corpora({"a": "一段文本"})
    with pytest.raises(DataError, match="nothing to pretrain on"):
        mix_corpora({"a": ["x"]}, exclude=["x"])
