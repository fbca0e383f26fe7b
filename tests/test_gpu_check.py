"""bench/gpu_check.py: the time guard skips sections, and files are written either way."""
import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"


def load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
