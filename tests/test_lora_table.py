"""Docs drift: the LoRA-beside-full-fine-tuning block of docs/finetuning.md is the rendering of the newest recorded
bench/sentiment_seeds.py --lora and bench/ner_seeds.py --lora runs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
lora_table = load_script(ROOT / "scripts" / "lora_table.py")


def test_the_block_is_the_rendering_of_the_recorded_runs():
    block = lora_table.render()
    for path in lora_table.FILES:
        inside = path.read_text(encoding="utf-8").split(lora_table.START, 1)[1].split(lora_table.END, 1)[0]
        assert inside.strip() == block.strip(), f"{path.name}: run python scripts/lora_table.py"


def test_rows_put_each_seed_of_each_task_beside_full_fine_tuning(tmp_path):
    lora = {"r": 8, "lr": 2e-3}
    share = {"share": 0.018}
    sentiment = tmp_path / "sentiment_lora_cpu_2026-12-05.json"
    sentiment.write_text(json.dumps({"per_seed": [
        {"seed": s, "bert": {"accuracy": 0.79 + s / 100, "interval": [0.77, 0.81]},
         "bert_lora": {"accuracy": 0.74, "interval": None, "lora": lora, "trainable_parameters": share}}
        for s in (0, 1)]}))
    ner = tmp_path / "ner_lora_cpu_2026-12-05.json"
    ner.write_text(json.dumps({"per_seed": [{"seed": 2, "bert_f1": 0.278, "bert_f1_interval": [0.25, 0.31],
                                             "lora_f1": 0.102, "lora_f1_interval": [0.09, 0.12], "lora": lora,
                                             "lora_trainable_parameters": share}], "summary": {}}))
    out = lora_table.rows(sentiment, ner)
    assert len(out) == 3
    assert out[1].startswith("| review sentiment, test accuracy | 1 | 0.800 [0.770, 0.810] | 0.740 | 1.8% | 0.002")
    assert out[2].startswith("| named entities, entity F1 | 2 | 0.278 [0.250, 0.310] | 0.102 [0.090, 0.120] | 1.8%")
    assert lora_table.rows(None, None) == [] and lora_table.spread(ner) == []          # no summary of one seed
    record = json.loads(ner.read_text())
    record["summary"] = {k: {"mean": m, "std": 0.01, "n": 3} for k, m in
                         (("bert_f1", 0.275), ("lora_f1", 0.112), ("diff_lora_f1", -0.164))}
    ner.write_text(json.dumps(record))
    assert lora_table.spread(ner)[1] == ("Named entities over 3 seeds (mean ± standard deviation): full fine-tuning "
                                         "0.275 ± 0.010, LoRA 0.112 ± 0.010, LoRA - full -0.164 ± 0.010 (paired by seed).")


def test_spread_gives_the_paired_sentiment_difference_once_there_are_seeds(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    import sentiment_seeds

    per_seed = [{"seed": s, **{arm: {"accuracy": a, "macro_f1": a} for arm, a in
                               (("bert", 0.79 + s / 100), ("tfidf", 0.84), ("tfidf_cut", 0.83), ("bilstm", 0.80),
                                ("bert_lora", 0.74 + s / 50))}} for s in (0, 1, 2)]
    summary = sentiment_seeds.summarize(per_seed)
    assert summary["diff_lora_accuracy"]["mean"] == pytest.approx(-0.04)      # -0.05, -0.04, -0.03: paired
    path = tmp_path / "sentiment_lora_cpu_2026-12-05.json"
    path.write_text(json.dumps({"per_seed": per_seed, "summary": summary}))
    assert lora_table.spread(None, path)[1] == (
        "Review sentiment (test accuracy) over 3 seeds (mean ± standard deviation): full fine-tuning 0.800 ± 0.010, "
        "LoRA 0.760 ± 0.020, LoRA - full -0.040 ± 0.010 (paired by seed).")
    assert lora_table.spread(None, None) == []
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"summary": sentiment_seeds.summarize(per_seed[:1])}))
    assert lora_table.spread(None, one) == []                                  # one seed is one draw, no spread
