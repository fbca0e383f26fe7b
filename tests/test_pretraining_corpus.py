"""The notebooks' pretraining corpus: sources mixed, held-out reviews excluded, whole words marked."""
import pytest

from nbkit.errors import ConfigError
from nbkit.pipeline import get_scale
from nbkit.pipeline.corpus import pretraining_corpus


@pytest.mark.slow  # over 5 s on 2 cores (scripts/test.sh --fast leaves it out)
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


def test_pretrain_config_caps_steps_at_passes_over_a_small_corpus(tmp_path):
    from nbkit.pipeline import pretrain_config

    cpu = get_scale("cpu")
    full = pretrain_config(cpu, tmp_path)
    assert full.max_steps == cpu.mlm_steps and full.eval_every == cpu.mlm_eval_every
    small = pretrain_config(cpu, tmp_path, n_blocks=320, max_passes=10)     # 320 blocks / 64 per step x 10 passes
    assert small.max_steps == 50 and small.eval_every == 12
    assert pretrain_config(cpu, tmp_path, n_blocks=10**6, max_passes=10).max_steps == cpu.mlm_steps  # scale caps too
