"""Docs drift: docs/instruct.md's "nbkit's SFT beside TRL" block is the rendering of the newest recorded
bench/sft_vs_trl.py run, and the renderer follows the record (ratios, the goal, the labels check)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
import blocks  # noqa: E402
import sft_bench_table  # noqa: E402


def test_block_is_the_rendering_of_the_recorded_run():
    for path in sft_bench_table.FILES:
        assert blocks.inside(path.read_text(encoding="utf-8"), sft_bench_table.START, sft_bench_table.END) == \
            sft_bench_table.render(), f"{path.name}'s block is stale: run .venv/bin/python scripts/sft_bench_table.py"


def test_the_block_follows_the_record(tmp_path):
    d = json.loads(sft_bench_table.newest("sft_vs_trl_cpu_*.json", missing="run bench/sft_vs_trl.py")
                   .read_text(encoding="utf-8"))
    d["median"]["nbkit"]["tokens_per_s"] = 4321.0
    d["ratios"]["nbkit_over_trl"].update(tokens_per_s=1.05, tokens_per_s_per_round=[1.1, 1.0])
    d["runs"]["trl"][0]["labels_equal_nbkit"] = False
    other = tmp_path / "sft_vs_trl_cpu_2099-01-01.json"
    other.write_text(json.dumps(d), encoding="utf-8")
    text = sft_bench_table.render_run(other)
    assert "| tokens/s (non-padding) | 4,321 |" in text
    assert "**1.05x** over the medians (per round 1.10, 1.00), which misses the goal of 1.2x" in text
    assert "are NOT the same as nbkit's" in text and "sft_vs_trl_cpu_2099-01-01.json" in text
    d["ratios"]["nbkit_over_trl"]["tokens_per_s"] = 1.3
    other.write_text(json.dumps(d), encoding="utf-8")
    assert "which reaches the goal of 1.2x" in sft_bench_table.render_run(other)
