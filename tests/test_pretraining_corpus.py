"""The one pretraining-corpus builder: sources mixed, held-out texts excluded, whole words marked."""
import pytest

from nbkit.errors import ConfigError
from nbkit.recipes.pretraining import pretraining_corpus


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
def test_news_and_training_reviews_without_held_out_reviews(tmp_path):
    from nbkit.data import load_sentiment

    splits, mixed = pretraining_corpus((("peoples_daily", 1.0), ("reviews", 2.0)), corpus_lines=200, max_train=300,
                                       cache_dir=tmp_path / "cache")
    assert mixed.report["reviews"]["n_out"] == 2 * mixed.report["reviews"]["n_kept"] > 0
    texts = set(splits["train"]["text"]) | set(splits["validation"]["text"])
    held = load_sentiment(seed=0, max_train=300).splits
    assert not texts & (set(held["validation"]["text"]) | set(held["test"]["text"]))
    assert all(w for w in splits["train"]["words"])                     # every row has word boundaries
    row = next(r for r in splits["train"] if r["source"] == "peoples_daily")
    assert "".join(row["words"]) == row["text"].replace(" ", "")      # gold words kept for the news
    assert list((tmp_path / "cache").glob("words-*.json"))            # jieba words cached


def test_the_split_seed_picks_which_reviews_are_held_out():
    """The pretraining seed may change; the excluded reviews are those of the fine-tuning split (split_seed)."""
    from nbkit.data import load_sentiment

    splits, _ = pretraining_corpus((("reviews", 1.0),), max_train=200, seed=3, split_seed=0, words=False)
    held = load_sentiment(seed=0, max_train=200).splits
    texts = set(splits["train"]["text"]) | set(splits["validation"]["text"])
    assert len(texts) > 100
    assert not texts & (set(held["validation"]["text"]) | set(held["test"]["text"]))


def test_unknown_source_and_own_without_texts_are_config_errors():
    with pytest.raises(ConfigError, match="unknown sources.*wikipedia"):
        pretraining_corpus((("wikipedia", 1.0),))
    with pytest.raises(ConfigError, match="'own' but no texts"):
        pretraining_corpus((("own", 1.0),))
