"""bench/causal_seeds.py's summary: mean and spread over seeds, and a verdict per baseline from those numbers."""
from pathlib import Path

import pytest
from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
causal_seeds = load_script(ROOT / "bench" / "causal_seeds.py")


def _seed(seed, ppl, tokens=500, base_tokens=None):
    base = [{"model": "2-gram KN", "eval_perplexity": 90.0, "eval_tokens": base_tokens or tokens, "train_tokens": 10},
            {"model": "3-gram KN", "eval_perplexity": 65.0, "eval_tokens": base_tokens or tokens, "train_tokens": 10}]
    return {"seed": seed, "split_seed": 0, "scale": "cpu", "model": "gpt2-narrow", "eval_perplexity": ppl,
            "eval_tokens": tokens, "train_s": 500.0 + seed, "train_tokens": 99, "baselines": base}


def test_summary_gives_mean_spread_and_a_verdict_per_baseline():
    out = causal_seeds.summarize([_seed(0, 80.0), _seed(1, 84.0), _seed(2, 70.0)], "test machine")
    assert out["gpt_perplexity"]["mean"] == pytest.approx(78.0)
    assert out["gpt_perplexity"]["sd"] == pytest.approx(7.2111, rel=1e-4)
    assert (out["gpt_perplexity"]["min"], out["gpt_perplexity"]["max"]) == (70.0, 84.0)
    assert out["beats"] == {"2-gram KN": True, "3-gram KN": False}
    assert out["beats_every_seed"] == {"2-gram KN": True, "3-gram KN": False}
    assert out["baselines"][0]["eval_perplexity"]["mean"] == 90.0 and out["baselines"][0]["train_tokens"] == [10] * 3
    assert [s["seed"] for s in out["seeds"]] == [0, 1, 2]


def test_baselines_on_other_targets_than_their_gpt_are_refused():
    with pytest.raises(ValueError, match="other held-out targets"):
        causal_seeds.summarize([_seed(0, 80.0), _seed(1, 80.0, base_tokens=400)], "m")
    with pytest.raises(ValueError, match="no seed"):
        causal_seeds.summarize([], "m")


def test_the_table_renders_the_summary(tmp_path):
    import json
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    import causal_table

    path = tmp_path / "causal_seeds_cpu_2026-12-03.json"
    path.write_text(json.dumps(causal_seeds.summarize([_seed(0, 80.0), _seed(1, 94.0)], "m")), encoding="utf-8")
    text = causal_table.render_seeds(path)
    assert "87.0 ± 9.9 (80.0 to 94.0)" in text
    assert "beats the 2-gram KN on the mean;" in text        # 87 < 90, but not in every seed (94)
    assert "does not beat the 3-gram KN on the mean" in text
