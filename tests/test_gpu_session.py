"""bench/gpu_session: the scripts parse, and record.py reads what the benchmarks print."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _load import load_script

ROOT = Path(__file__).resolve().parents[1]
record = load_script(ROOT / "bench" / "gpu_session" / "record.py", "gpu_record")

NVML_TEXT = """== 1. one sample of all metrics
NVML sample, 1 GPU(s), pcie=False:     0.24 ms
NVML sample, 1 GPU(s), pcie=True:    42.32 ms
nvidia-smi --query-gpu call:              25.18 ms
ratio nvidia-smi / NVML (same fields, no PCIe):     57.5x
median tokens/s without 184702, with 186390: ratio with/without 1.0091 (cost -0.91 %; run-to-run spread without monitor 13.0 %)
noise-free estimate: the sampler thread (read + widget update) used CPU for 0.329 % of the run at most (thread_time; target < 1 %)
"""


def test_parse_bench_nvml_reads_every_headline():
    d = record.parse_bench_nvml(NVML_TEXT)
    assert d == {"nvml_sample_ms": 0.24, "nvml_sample_pcie_ms": 42.32, "smi_call_ms": 25.18, "smi_over_nvml": 57.5,
                 "tokens_per_s_without_monitor": 184702.0, "tokens_per_s_with_monitor": 186390.0,
                 "with_over_without": 1.0091, "spread_without_pct": 13.0, "sampler_cpu_pct": 0.329}
    assert record.parse_bench_nvml("no GPU here") == {}


def test_parse_pytest_counts_and_names():
    text = "PASSED tests/a.py::t1\nFAILED tests/b.py::t2 - boom\n1 failed, 1 passed, 35 deselected in 2.0s\nrc=1\n"
    d = record.parse_pytest(text)
    assert d["passed"] == 1 and d["failed"] == 1 and d["tests"] == ["tests/a.py::t1"]
    assert d["failures"] == ["tests/b.py::t2"]


@pytest.mark.parametrize("script", ["run.sh", "pretrain_value.sh", "build_bundle.sh", "common.sh", "issue51.sh"])
def test_session_scripts_parse(script):
    res = subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_session" / script)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


record51 = load_script(ROOT / "bench" / "gpu_session" / "record51.py")
REHEARSAL = ROOT / "bench" / "results" / "issue51_cpu_2026-12-05"


def test_issue51_headline_is_derived_from_the_bench_records_beside_it():
    """The CPU rehearsal of issue51.sh, recorded as a GPU session will be: every headline number is read from the
    bench's own JSON (a changed record format fails here before a device session is spent on it)."""
    from nbkit import jsonio

    recorded = jsonio.loads_strict((REHEARSAL / "headline.json").read_text(encoding="utf-8"))
    derived = record51.headline(REHEARSAL / "results")
    assert {k: recorded[k] for k in derived} == derived
    # every stage ran in the rehearsal: nothing is None that a CPU can measure
    assert derived["loop_tokens_per_s"] > 0 and 0 <= derived["data_share"] < 1
    for key in ("mlm_over_trainer", "causal_over_trainer"):
        assert derived[key]["ratio"] > 0 and derived[key]["nbkit_mfu"] is None   # no peak off a GPU
    assert set(derived["sft"]["median"]) == {"nbkit", "trl", "lora"}
    assert derived["lora"]["gpt2"]["trainable_parameters"] < 0.05
    assert derived["store"]["reader"] == "4 DataLoader workers" and len(derived["store"]["read_over_consumed"]) == 2
    assert "liger" in derived["fused_loss"]["absent"]          # Triton kernels: GPU only, and the reason is kept


def test_record51_records_a_session_once_and_refuses_to_overwrite_it(tmp_path):
    import shutil
    import tarfile

    files = tmp_path / "files"
    files.mkdir()
    with tarfile.open(files / "issue51.tgz", "w:gz") as tar:
        tar.add(REHEARSAL / "results", arcname="results")
    shutil.copy(REHEARSAL / "summary.txt", files / "summary.txt")
    out = record51.main([str(files), "--machine", "m", "--out", str(tmp_path / "rec")])
    assert sorted(p.name for p in out.iterdir()) == ["headline.json", "results", "summary.txt"]
    before = (out / "headline.json").read_bytes()
    with pytest.raises(SystemExit, match="exists"):
        record51.main([str(files), "--machine", "other", "--out", str(out)])
    assert (out / "headline.json").read_bytes() == before
