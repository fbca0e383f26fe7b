"""The notebooks' pretraining corpus: sources mixed, held-out reviews excluded, whole words marked."""
import pytest

from nbkit.errors import ConfigError
from nbkit.pipeline import get_scale
from nbkit.pipeline.corpus import pretraining_corpus


def test_news_and_training_reviews_without_held_out_reviews(monkeypatch, tmp_path):
    from nbkit.data import load_sentiment

    monkeypatch.setenv("NBKIT_RUNS_DIR", str(tmp_path))
    scale = get_scale("smoke").replace(corpus_lines=200, sentiment_max_train=300,
                                       mlm_mix=(("peoples_daily", 1.0), ("reviews", 2.0)))
    splits, mixed = pretraining_corpus(scale)
    assert mixed.report["reviews"]["n_out"] == 2 * mixed.report["reviews"]["n_kept"] > 0
    texts = set(splits["train"]["text"]) | set(splits["validation"]["text"])
    held = load_sentiment(seed=scale.seed, max_train=300).splits
    assert not texts & (set(held["validation"]["text"]) | set(held["test"]["text"]))
    assert all(w for w in splits["train"]["words"])                     # every row has word boundaries
    row = next(r for r in splits["train"] if r["source"] == "peoples_daily")
    assert "".join(row["words"]) == row["text"].replace(" ", "")      # gold words kept for the news
    assert list(tmp_path.glob("smoke/cache/words-*.json"))            # jieba words cached


def test_unknown_source_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown sources"):
        pretraining_corpus(get_scale("smoke").replace(mlm_mix=(("wikipedia", 1.0),)))
