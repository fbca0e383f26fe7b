"""Docs drift: docs/ner.md's named-entity block (BERT vs CRF vs BiLSTM over seeds) and its headline line on both front
pages are the rendering of the newest recorded bench/ner_seeds.py run."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
ner_table = load_script(ROOT / "scripts" / "ner_table.py")  # puts scripts/lib/ on sys.path
sys.path.insert(0, str(ROOT / "bench"))
import blocks  # noqa: E402
import ner_seeds  # noqa: E402


def test_readme_blocks_are_the_rendering_of_the_recorded_run():
    block = ner_table.render()
    for path in ner_table.FILES:
        inside = path.read_text(encoding="utf-8").split(ner_table.START, 1)[1].split(ner_table.END, 1)[0]
        assert inside.strip() == block.strip(), f"{path.name}: run python scripts/ner_table.py"
    for readme in blocks.READMES:
        assert blocks.inside(readme.read_text(encoding="utf-8"), ner_table.HEAD_START, ner_table.HEAD_END) == \
            ner_table.headline(), f"{readme.name}: run python scripts/ner_table.py"


def _row(seed, bert, crf):
    return {"seed": seed, "bert_f1": bert, "bert_f1_interval": [bert - 0.02, bert + 0.02], "crf_f1": crf,
            "crf_f1_interval": [crf - 0.02, crf + 0.02], "diff_f1_interval": [bert - crf - 0.03, bert - crf + 0.03],
            "bert_per_type": {"LOC": 0.8, "ORG": 0.5, "PER": 0.9},
            "crf_per_type": {"LOC": 0.7, "ORG": 0.6, "PER": 0.8}, "n_train": 3000, "n_test": 2100,
            "init": "from scratch: preset 'narrow'; random init", "wall_s": 301.4, "finetune_s": 180.2}


def test_a_record_renders_one_row_per_seed_and_says_who_wins(tmp_path):
    rows = [_row(0, 0.70, 0.75), _row(1, 0.72, 0.74)]
    record = {"per_seed": rows, "summary": ner_seeds.summarize(rows), "scale": "cpu", "device": "CPU",
              "machine": "2-core CPU shared with other jobs", "written_at": "2026-12-03T07:00:00",
              "config": {"model": "narrow", "max_length": 128, "stride": 32, "epochs": 2.0, "n_boot": 1000,
                         "batch_size": 32, "lr": 5e-4}}
    path = tmp_path / "ner_cpu_2026-12-03.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    text = ner_table.render_run(path)
    assert "| 0 | 0.700 [0.680, 0.720] | 0.80 / 0.50 / 0.90 | 0.750 [0.730, 0.770]" in text
    assert "| mean ± std (2 seeds) | 0.710 ± 0.014 |" in text and "-0.035 ± 0.021" in text
    assert "the CRF wins on average, by 0.035 F1" in text and "shared with other jobs" in text
    assert "| -0.050 [-0.080, -0.020] | 301 (180) |" in text             # seed 0: its interval excludes 0
    assert "above the CRF on 0 of 2 seeds, below it on 1." in text
    assert ner_table.headline(path).startswith("At `cpu`, entity-level F1 on People's Daily over 2 seeds: "
                                               "**BERT 0.710 ± 0.014, CRF 0.745 ± 0.007**")
    assert ner_table.headline(path).endswith("the CRF wins by 0.035 F1.")
    assert record["summary"]["diff_f1"]["n"] == 2 and ner_seeds.summarize(rows[:1])["bert_f1"]["std"] is None


def test_the_bilstm_reference_gets_its_columns_and_the_encoder_is_named_without_a_path(tmp_path):
    rows = [_row(0, 0.70, 0.75), _row(1, 0.72, 0.74)]
    for r, lstm in zip(rows, (0.65, 0.60)):
        r.update(bilstm_f1=lstm, bilstm_f1_interval=[lstm - 0.02, lstm + 0.02],
                 bilstm_per_type={"LOC": 0.7, "ORG": 0.4, "PER": 0.6},
                 init="loaded encoder from local checkpoint '/tmp/s38/runs/cpu/mlm/model'; a head")
    record = {"per_seed": rows, "summary": ner_seeds.summarize(rows), "scale": "cpu", "device": "CPU",
              "machine": "2-core CPU", "written_at": "2026-12-05T07:00:00",
              "config": {"model": "narrow", "max_length": 128, "stride": 32, "epochs": 6.0, "n_boot": 1000,
                         "batch_size": 16, "lr": 1e-3}}
    path = tmp_path / "ner_cpu_2026-12-05.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    text = ner_table.render_run(path)
    assert "| BiLSTM F1 [95 % CI] | BiLSTM per type |" in text and "(notebook 02's cpu encoder)" in text
    assert "/tmp/s38" not in text and "| 0.650 [0.630, 0.670] | 0.70 / 0.40 / 0.60 |" in text
    assert "| 0.625 ± 0.035 | |" in text and "BERT is +0.085 F1 on average (ahead on 2 of 2 seeds)" in text
