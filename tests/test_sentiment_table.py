"""Docs drift: the sentiment block of docs/finetuning.md and its headline line on both front pages are the rendering of
the newest recorded bench/sentiment_seeds.py run (BERT beside TF-IDF and the character BiLSTM over seeds)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
sentiment_table = load_script(ROOT / "scripts" / "sentiment_table.py")  # puts scripts/lib/ on sys.path
import blocks  # noqa: E402
import sentiment_seeds  # noqa: E402


def test_blocks_are_the_rendering_of_the_recorded_run():
    block = sentiment_table.render()
    for path in sentiment_table.FILES:
        inside = path.read_text(encoding="utf-8").split(sentiment_table.START, 1)[1].split(sentiment_table.END, 1)[0]
        assert inside.strip() == block.strip(), f"{path.name}: run python scripts/sentiment_table.py"
    for readme in blocks.READMES:
        assert blocks.inside(readme.read_text(encoding="utf-8"), sentiment_table.HEAD_START, sentiment_table.HEAD_END) \
            == sentiment_table.headline(), f"{readme.name}: run python scripts/sentiment_table.py"


def _row(seed, bert, tfidf, cut, lstm):
    arm = lambda acc, **kw: {"accuracy": acc, "macro_f1": acc - 0.01, **kw}   # noqa: E731
    return {"seed": seed, "n_train": 13889, "n_test": 1737, "truncated_fraction": 0.36,
            "init": "loaded encoder from local checkpoint '/tmp/x/runs/cpu/mlm/model'; mean pooling",
            "bert": arm(bert, interval=[bert - 0.02, bert + 0.02]), "tfidf": arm(tfidf), "tfidf_cut": arm(cut),
            "bilstm": arm(lstm, interval=[lstm - 0.02, lstm + 0.02], max_chars=62, steps=869)}


def test_a_record_renders_every_arm_per_seed_and_where_bert_stands(tmp_path):
    rows = [_row(0, 0.80, 0.85, 0.82, 0.81), _row(1, 0.82, 0.84, 0.83, 0.80)]
    record = {"per_seed": rows, "summary": sentiment_seeds.summarize(rows), "scale": "cpu", "device": "CPU",
              "machine": "2-core CPU", "written_at": "2026-12-05T10:00:00",
              "config": {"model": "narrow", "max_length": 64, "epochs": 2.0, "lr": 5e-4}}
    path = tmp_path / "sentiment_cpu_2026-12-05.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    text = sentiment_table.render_run(path)
    assert "| 0 | 0.800 [0.780, 0.820] | 0.820 | 0.850 | 0.810 [0.790, 0.830] |" in text
    assert "| accuracy, mean ± std (2 seeds) | 0.810 ± 0.014 | 0.825 ± 0.007 | 0.845 ± 0.007 | 0.805 ± 0.007 |" in text
    assert "notebook 02's cpu encoder" in text and "/tmp/x" not in text and "(36% of test reviews cut)" in text
    assert "character BiLSTM, same cut +0.005 (ahead on 1 of 2 seeds)" in text
    assert "TF-IDF + LR, full text -0.035 (ahead on 0 of 2 seeds)" in text
    assert "over 2 seeds: **fine-tuned BERT 0.810 ± 0.014; TF-IDF + LR, same cut 0.825 ± 0.007;" in \
        sentiment_table.headline(path)


def test_the_accuracy_interval_is_a_bootstrap_over_examples():
    gold = [0, 1] * 50
    assert sentiment_seeds.accuracy_interval(gold, gold) == [1.0, 1.0]
    low, high = sentiment_seeds.accuracy_interval(gold, [0] * 100, n_boot=500)
    assert low < 0.5 < high and high - low < 0.25
