#!/usr/bin/env python
"""Record a GPU session's results in the repo and derive ``session.json``, the README's GPU numbers.

Reads the folders that ``run.sh`` (``gpu_session.tgz`` unpacked) and ``pretrain_value.sh``
(``pv_gpu.tgz`` unpacked) left, copies the small text/JSON results under ``--out`` (no
checkpoints, no traces) and writes ``--out/session.json`` with the headline numbers, parsed from
``bench/gpu_check.py``'s ``results.json``, ``bench/bench_nvml.py``'s printout, the pytest summary,
the executed notebooks' ``metrics.json``/``timings.json`` and ``bench/pretrain_value.py``'s
``stats.json``. ``scripts/expect_table.py`` renders the README's GPU block from it.

    python bench/gpu_session/record.py --check-dir /tmp/dev1 --pv-dir /tmp/dev2 \
        --out bench/results/gpu_h200_2026-11-30 --machine "1 x NVIDIA H200 (141 GB), 16 vCPUs"
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nbkit import jsonio  # noqa: E402

_NUM = r"([0-9][0-9.,]*)"


def parse_bench_nvml(text: str) -> dict:
    """Headline numbers of ``bench/bench_nvml.py``'s printout (ms, ratios, tokens/s); missing lines give no key."""
    out = {}
    pats = {"nvml_sample_ms": rf"pcie=False:\s+{_NUM} ms", "nvml_sample_pcie_ms": rf"pcie=True:\s+{_NUM} ms",
            "smi_call_ms": rf"nvidia-smi --query-gpu call:\s+{_NUM} ms",
            "smi_over_nvml": rf"ratio nvidia-smi / NVML.*?:\s+{_NUM}x",
            "tokens_per_s_without_monitor": rf"median tokens/s without {_NUM}",
            "tokens_per_s_with_monitor": rf"median tokens/s without [0-9.]+, with {_NUM}",
            "with_over_without": rf"ratio with/without {_NUM}",
            "spread_without_pct": rf"spread without monitor {_NUM} %",
            "sampler_cpu_pct": rf"used CPU for {_NUM} % of the run"}
    for key, pat in pats.items():
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1).replace(",", ""))
    return out


def parse_pytest(text: str) -> dict:
    """``{"passed": n, "failed": n, "skipped": n, "tests": [...]}`` from ``pytest -rA -q`` output."""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", text.splitlines()[-2]
                                               if len(text.splitlines()) > 1 else "")}
    counts["tests"] = re.findall(r"^PASSED (\S+)", text, flags=re.M)
    counts["failures"] = re.findall(r"^FAILED (\S+)", text, flags=re.M)
    return counts


def gpu_check_headline(res: dict) -> dict:
    """BERT-base MLM rows (eager/compiled), the MLM-head ablation, bf16 matmul and SDPA rows, the profile check."""
    keep = ("batch_size", "seq_len", "precision", "step_ms", "tokens_per_s", "achieved_tflops", "mfu",
            "peak_memory_mib", "mlm_head")
    out = {k: {f: res[k].get(f) for f in keep} for k in ("bert_eager", "bert_compiled") if res.get(k)}
    out["mlm_head"] = [{f: r.get(f) for f in ("value", "tokens_per_s", "speedup", "batch_size")}
                       for r in res.get("ablation_mlm_head") or []]
    out["matmul_bf16"] = [{f: r.get(f) for f in ("n", "tflops", "pct_of_peak")}
                          for r in res.get("matmul") or [] if r.get("precision") == "bf16"]
    out["sdpa"] = [{f: r.get(f) for f in ("seq_len", "backend", "ms", "speedup_vs_math")} for r in res.get("sdpa") or []]
    out["profile_kernel_check"] = ((res.get("profile") or {}).get("kernel_check") or {}).get("message")
    out["diagnosis"] = (res.get("diagnosis") or {}).get("bound")
    out["env"] = res.get("env")
    return out


def notebooks(runs: Path) -> dict:
    """Per-notebook wall seconds and the MLM / sentiment metrics of one ``runs/gpu`` folder."""
    out = {}
    for name, rel in (("timings", "executed/timings.json"), ("mlm", "mlm/metrics.json"),
                      ("sentiment", "sentiment/metrics.json")):
        p = runs / rel
        if p.exists():
            d = json.loads(p.read_text())
            out[name] = {k: v for k, v in d.items() if not isinstance(v, (list, dict)) or k == "seconds"}
    return out


def copy_notebooks_log(src: Path, dst: Path) -> None:
    """``nbkit run-notebooks``' log without its heartbeats: the per-cell start lines and the summary stay."""
    if src.exists():
        lines = [ln for ln in src.read_text().splitlines() if "still running" not in ln]
        dst.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check-dir", type=Path, required=True, help="run.sh's work folder (gpu_session.tgz unpacked)")
    ap.add_argument("--pv-dir", type=Path, default=None, help="pretrain_value.sh's work folder (pv_gpu.tgz)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--note", action="append", default=[], help="a sentence for session.json's notes")
    a = ap.parse_args(argv)
    c, out = a.check_dir, a.out
    out.mkdir(parents=True, exist_ok=True)
    copies = {"env.txt": "env.txt", "doctor.txt": "doctor.txt", "pytest_gpu.txt": "pytest_gpu.txt",
              "bench_nvml.txt": "bench_nvml.txt", "check/results.json": "gpu_check_results.json",
              "check/summary.txt": "gpu_check_summary.txt", "stages.txt": "stages.txt"}
    for src, dst in copies.items():
        if (c / src).exists():
            shutil.copy(c / src, out / dst)
    copy_notebooks_log(c / "notebooks.log", out / "notebooks.log")
    session = {"machine": a.machine, "notes": a.note,
               "pytest_gpu": parse_pytest((c / "pytest_gpu.txt").read_text()),
               "nvml": parse_bench_nvml((c / "bench_nvml.txt").read_text()),
               "gpu_check": gpu_check_headline(json.loads((c / "check/results.json").read_text())),
               "notebooks": notebooks(c / "runs" / "gpu")}
    for name in ("mlm", "sentiment"):
        p = c / "runs" / "gpu" / name / "metrics.json"
        if p.exists():
            shutil.copy(p, out / f"notebooks_{name}_metrics.json")
    if a.pv_dir:
        pv = out / "pretrain_value"
        pv.mkdir(exist_ok=True)
        for src in ("pv/stats.json", "pv/finetune.jsonl", "pv/pretrain.json", "pretrain.log", "report.txt",
                    "stages.txt"):
            if (a.pv_dir / src).exists():
                shutil.copy(a.pv_dir / src, pv / Path(src).name)
        copy_notebooks_log(a.pv_dir / "notebooks.log", pv / "notebooks.log")
        session["notebooks_preset_run"] = notebooks(a.pv_dir / "runs" / "gpu")
        p = a.pv_dir / "runs" / "gpu" / "mlm" / "metrics.json"
        if p.exists():
            shutil.copy(p, pv / "notebooks_mlm_metrics.json")
    jsonio.write_json(out / "session.json", session, indent=1)
    print(f"wrote {out / 'session.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
