"""bench/gpu_check.py: the time guard skips sections, and files are written either way."""
import json
from pathlib import Path

import pytest
from _load import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"


def load():
    return load_script(SCRIPT, "gpu_check")


def test_zero_budget_skips_every_timed_section_but_writes_results(tmp_path):
    gc = load()
    assert gc.main(["--quick", "--budget-s", "0", "--no-pytest", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    skipped = {s.split(":")[0] for s in res["skipped"]}
    assert {"matmul", "sdpa", "h2d", "bert_eager", "phases", "profile"} <= skipped
    assert "matmul" not in res and res["env"]["quick"] is True
    summary = (tmp_path / "summary.txt").read_text()
    assert summary.startswith("device ") and "skipped matmul" in summary


def test_summary_renders_recorded_gpu_numbers():
    gc = load()
    res = {"env": {"device": "NVIDIA H200", "torch": "2.13", "precision": "bf16", "quick": False},
           "total_s": 300, "skipped": [], "errors": {},
           "matmul": [{"n": 8192, "precision": "bf16", "tflops": 700.0, "gflops": 7e5,
                       "peak_tflops": 989.0, "pct_of_peak": 70.8, "status": "ok"}],
           "bert_compiled": {"batch_size": 256, "seq_len": 128, "precision": "bf16", "step_ms": 80.0,
                             "tokens_per_s": 409600.0, "achieved_tflops": 256.0, "mfu": 0.259,
                             "peak_memory_mib": 30000.0}}
    text = gc.render_summary(res)
    assert "700.0 TFLOP/s  peak 989  (70.8 %)" in text
    assert "409600 tokens/s" in text and "MFU 25.9 %" in text


def test_headline_row_measures_the_loops_train_step(monkeypatch):
    """The MFU row is timed on Loop.train_step of a loop built like the training one."""
    import transformers

    from nbkit.models.flops import bert_batch_flops
    from nbkit.models.mlm_head import SparseHeadBertForMaskedLM
    from nbkit.profiling.step_timing import StepConfig, step_loop
    from nbkit.train.loop import Loop

    gc = load()
    calls, real = [], Loop.train_step
    monkeypatch.setattr(Loop, "train_step", lambda self, window, mark=None: calls.append(self) or real(self, window, mark))
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=32)
    loop = step_loop(SparseHeadBertForMaskedLM(config), StepConfig(batch_size=4, seq_len=16, mlm_head="masked"),
                     device="cpu")
    row = gc.loop_step_row(loop, warmup=1, iters=1, repeats=2)
    assert calls == [loop] * 4                           # warm-up, 2 timed runs, 1 for the FLOP count
    assert row["tokens_per_s"] == pytest.approx(4 * 16 / (row["step_ms"] / 1e3))
    assert row["mlm_head"] == "masked" and row["seq_len"] == 16 and row["mfu"] is None  # CPU: no peak
    full_head = bert_batch_flops(config, 64, 16, 64) / 64
    assert 0 < row["flops_per_token"] < full_head       # the sparse head ran on the labelled rows only
