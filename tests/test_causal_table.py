"""scripts/causal_table.py: the "A Chinese GPT" block of docs/pretraining.md and its headline line on both front pages
are the rendering of the recorded JSON."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
import blocks  # noqa: E402
import causal_table  # noqa: E402


def test_block_is_the_rendering_of_the_recorded_runs():
    block = causal_table.render()
    for path in causal_table.FILES:
        text = path.read_text(encoding="utf-8")
        inside = text.split(causal_table.START, 1)[1].split(causal_table.END, 1)[0]
        assert inside.strip() == block, f"{path.name}'s block is stale: run .venv/bin/python scripts/causal_table.py"
    for readme in blocks.READMES:
        assert blocks.inside(readme.read_text(encoding="utf-8"), causal_table.HEAD_START, causal_table.HEAD_END) == \
            causal_table.headline(), f"{readme.name}: run .venv/bin/python scripts/causal_table.py"


def test_the_headline_follows_the_seeds_record(tmp_path):
    d = json.loads(causal_table.newest("causal_seeds_*.json").read_text(encoding="utf-8"))
    d["gpt_perplexity"]["mean"], d["gpt_perplexity"]["sd"] = 55.55, None
    other = tmp_path / "causal_seeds_cpu_2099-01-01.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    line = causal_table.headline(seeds=other)
    assert "held-out perplexity **55.5** over" in line and "3-gram KN" in line and "the tokens/s of" in line


def test_throughput_rows_follow_the_file(tmp_path):
    d = json.loads(causal_table.newest("causal_vs_trainer_*.json").read_text(encoding="utf-8"))
    d["median"]["trainer"]["tokens_per_s"] = 1234.5
    d["ratio_nbkit_over_trainer"]["tokens_per_s_per_round"] = [0.5, 2.0]
    other = tmp_path / "causal_vs_trainer_cpu_2099-01-01.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    text = causal_table.render_throughput(other)
    assert "| 1,234.5 |" in text and "per round x0.50, x2.00" in text and d["machine"] in text


def _fake_run(run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    rows = [{"model": "GPT (gpt2-narrow)", "eval_perplexity": 90.25, "eval_loss": 4.5, "eval_tokens": 8192,
             "train_tokens": 4_096_000},
            {"model": "2-gram KN", "eval_perplexity": 120.0, "eval_loss": 4.8, "eval_tokens": 8192,
             "train_tokens": 900_000},
            {"model": "3-gram KN", "eval_perplexity": 85.0, "eval_loss": 4.4, "eval_tokens": 8192,
             "train_tokens": 900_000}]
    (run_dir / "baselines.json").write_text(json.dumps(
        {"rows": rows, "beats": {"2-gram KN": True, "3-gram KN": False}, "same_targets": True, "text": ""}))
    from nbkit.recipes.pretraining import PretrainConfig

    config = PretrainConfig.for_scale("cpu", objective="causal", max_steps=300).to_dict()
    (run_dir / "metrics.json").write_text(json.dumps(
        {"scale": "cpu", "steps": 300, "tokens_per_s": 2345.6, "device": "cpu", "precision": "fp32",
         "config": config}))


def test_record_then_render_the_notebook_row(tmp_path):
    _fake_run(tmp_path / "causal")
    out = causal_table.record(tmp_path / "causal", "2-core CPU, shared", wall_s=540.0, out=tmp_path / "nb.json")
    d = json.loads(out.read_text(encoding="utf-8"))
    assert d["overrides"] == {"max_steps": 300}          # only what differs from the scale's recipe
    text = causal_table.render_notebook(out)
    assert "| GPT (gpt2-narrow) | 90.2 | 4,096,000 |" in text and "| 3-gram KN | 85.0 | 900,000 |" in text
    assert "beats the 2-gram KN; does not beat the 3-gram KN" in text
    assert "`max_steps=300`" in text and "9.0 minutes" in text and "8,192 held-out targets" in text
    both = causal_table.render(notebook=out)
    assert both.startswith("`bench/causal_vs_trainer.py`") and "Notebook `06_chinese_gpt`" in both


def test_replace_block_needs_its_own_markers():
    with pytest.raises(ValueError, match="exactly one"):
        blocks.replace_block("no markers", "B", causal_table.START, causal_table.END)
    text = f"a\n{causal_table.START}\nold\n{causal_table.END}\nb"
    assert blocks.replace_block(text, "new", causal_table.START, causal_table.END) == \
        f"a\n{causal_table.START}\nnew\n{causal_table.END}\nb"
    with pytest.raises(ValueError, match="exactly one"):          # another block's markers are not these
        blocks.replace_block(text, "new", causal_table.HEAD_START, causal_table.HEAD_END)
