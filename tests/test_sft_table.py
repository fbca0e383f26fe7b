"""Docs drift: docs/instruct.md's recorded SFT block (before / after SFT beside the baselines) and its LoRA block
are the rendering of the newest recorded bench/sft_cpu.py and bench/lora.py runs; a record renders its rows, the
loss before and after, and per task how the tuned model stands against the best baseline."""
from __future__ import annotations

import json
from pathlib import Path

from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
sft_table = load_script(ROOT / "scripts" / "sft_table.py")  # puts scripts/lib/ on sys.path
import blocks  # noqa: E402


def test_docs_blocks_are_the_rendering_of_the_recorded_runs():
    text = sft_table.FILES[0].read_text(encoding="utf-8")
    assert blocks.inside(text, sft_table.START, sft_table.END) == sft_table.render().strip(), \
        "docs/instruct.md: run python scripts/sft_table.py"
    assert blocks.inside(text, sft_table.LORA_START, sft_table.LORA_END) == sft_table.render_lora().strip(), \
        "docs/instruct.md: run python scripts/sft_table.py"
    for readme in blocks.READMES:
        assert blocks.inside(readme.read_text(encoding="utf-8"), sft_table.HEAD_START, sft_table.HEAD_END) \
            == sft_table.headline(), f"{readme.name}: run python scripts/sft_table.py"


def _row(model, task, value, form=1.0, n=20):
    return {"model": model, "task": task, "metric": "accuracy" if task == "sentiment" else "f1", "n": n,
            "value": value, "low": value - 0.1, "high": value + 0.1, "form_share": form}


def test_a_record_renders_its_rows_losses_and_the_verdict_per_task(tmp_path):
    rows = [_row("before SFT", "sentiment", 0.0, 0.0), _row("after SFT", "sentiment", 0.55, 0.9),
            _row("TF-IDF / CRF", "sentiment", 0.8), _row("before SFT", "places", 0.0, 0.0),
            _row("after SFT", "places", 0.4, 0.75), _row("TF-IDF / CRF", "places", 0.3)]
    record = {"scale": "cpu", "device": "cpu", "machine": "2 shared cores", "written_at": "2026-12-05T14:00:00",
              "init": "/tmp/x/runs/cpu/causal/model", "model": "gpt2-narrow",
              "pretrained_now": {"steps": 850, "eval_perplexity": 61.2}, "steps": 400, "train_tokens": 123456,
              "max_new_tokens": 24, "n_test": {"sentiment": 20, "places": 20}, "eval_loss_before": 5.1234,
              "eval_loss_after": 1.2345, "unfinished": {"before SFT": 40, "after SFT": 3}, "rows": rows,
              "bert_whole_test": {"test_accuracy": 0.7944, "n": 1736, "run_dir": "/x"}}
    path = tmp_path / "sft_cpu_2026-12-05.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    text = sft_table.render_run(path)
    assert "SFT from notebook 06's `cpu` GPT (gpt2-narrow preset, pretrained in the same run: 850 steps" in text
    assert "5.123 before SFT, 1.234 after" in text and "(20 sentiment, 20 places)" in text
    assert "| after SFT | sentiment accuracy | 0.550 [0.450, 0.650] | 90% | 20 |" in text
    assert "| TF-IDF / CRF | place-name F1 | 0.300 [0.200, 0.400] | 100% | 20 |" in text
    assert "40 before SFT, 3 after, of 40." in text and "test accuracy 0.794 over its whole test split (1,736" in text
    assert "sentiment accuracy 0.250 behind TF-IDF / CRF; place-name F1 0.100 ahead of TF-IDF / CRF." in text
    assert "/tmp/x" not in text and "`smoke` scale" not in text
    assert sft_table.headline(path) == ("At `cpu`, notebook 06's GPT after 400 SFT steps, on 40 held-out questions: "
                                        "**sentiment accuracy 0.550 vs TF-IDF 0.800; place-name F1 0.400 vs the CRF "
                                        "0.300** (`" + str(path) + "`).")
    record["scale"] = "smoke"
    record["rows"][4]["value"] = 0.3                                                   # places: level
    path.write_text(json.dumps(record), encoding="utf-8")
    text = sft_table.render_run(path)
    assert "This is the `smoke` scale" in text and "place-name F1 level with TF-IDF / CRF." in text


def test_without_a_record_the_blocks_say_how_to_make_one(monkeypatch):
    monkeypatch.setattr(sft_table, "newest", lambda pattern: None)
    assert sft_table.render() == sft_table.PENDING and sft_table.render_lora() == sft_table.LORA_PENDING
    assert sft_table.headline() == sft_table.PENDING
    assert "bench/sft_cpu.py --scale cpu" in sft_table.PENDING
    assert sft_table.model_name("/a/b/ckpt/model") == "`ckpt/model`"
