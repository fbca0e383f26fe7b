#!/usr/bin/env python
"""Record what ``issue51.sh`` measured: unpack its ``issue51.tgz`` into ``bench/results/issue51_<device>_<date>/``
and write ``headline.json`` there, the numbers issue 51 asks for, each read from the bench's own JSON record.

Headline keys (None where a stage did not run or its record lacks the number):

- ``loop_mfu`` / ``loop_mfu_compiled`` / ``loop_tokens_per_s``: ``Loop.train_step`` on BERT-base MLM, seq 128
  (``bench/gpu_check.py``'s ``bert_eager`` / ``bert_compiled``); ``data_share``: the share of a step spent waiting
  for the batch (``phases``);
- ``mlm_over_trainer`` / ``causal_over_trainer``: nbkit's median tokens/s over ``transformers.Trainer``'s, with
  each arm's MFU (``bench/continued_pretraining.py``, ``bench/causal_vs_trainer.py``);
- ``fused_loss``: seconds per call and peak MiB of each chunk size and of Liger-Kernel, over unfused;
- ``sft``: tokens/s and peak CUDA MiB of nbkit, TRL's SFTTrainer and nbkit with LoRA, and the two ratios;
- ``lora``: LoRA over full fine-tuning (tokens/s, peak CUDA MiB, trainable parameters) for BERT and GPT-2;
- ``store``: the reader's blocks/s with 4 workers over the blocks/s the MLM arm consumed (> 1: no step waits).

    python bench/gpu_session/record51.py /work/.device/<files_at> --machine "1 x NVIDIA H100 80GB HBM3, 16 CPUs"
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from nbkit import jsonio  # noqa: E402


def _load(results: Path, prefix: str) -> dict | None:
    found = sorted(results.glob(f"{prefix}_*.json"))
    return jsonio.loads_strict(found[-1].read_text(encoding="utf-8")) if found else None


def headline(results: Path) -> dict:
    """The issue's numbers from the bench records in ``results`` (the tarball's ``results/`` folder)."""
    out: dict = {}
    check = _load(results, "gpu_check") or {}
    eager, compiled, phases = check.get("bert_eager") or {}, check.get("bert_compiled") or {}, check.get("phases")
    out["loop_mfu"], out["loop_tokens_per_s"] = eager.get("mfu"), eager.get("tokens_per_s")
    out["loop_mfu_compiled"], out["loop_tokens_per_s_compiled"] = compiled.get("mfu"), compiled.get("tokens_per_s")
    out["data_share"] = phases[0].get("data_share") if isinstance(phases, list) and phases else None
    for key, prefix in (("mlm_over_trainer", "continued_pretraining"), ("causal_over_trainer", "causal_vs_trainer")):
        rec = _load(results, prefix)
        out[key] = None if rec is None else {
            "ratio": rec["ratio_nbkit_over_trainer"]["tokens_per_s"],
            **{f"{arm}_{k}": rec["median"][arm].get(k) for arm in ("nbkit", "trainer")
               for k in ("tokens_per_s", "mfu", "cuda_peak_mib")}}
    rec = _load(results, "fused_loss_chunks")
    out["fused_loss"] = None if rec is None else {
        "speedup_over_unfused": rec["speedup_over_unfused"], "peak_mib": rec.get("peak_mib_over_inputs"),
        "absent": rec.get("absent", {})}
    rec = _load(results, "sft_vs_trl")
    out["sft"] = None if rec is None else {
        "median": {arm: {k: v for k, v in m.items() if k in ("tokens_per_s", "cuda_peak_mib", "trainable_parameters")}
                   for arm, m in rec["median"].items()},
        "nbkit_over_trl": rec["ratios"]["nbkit_over_trl"].get("tokens_per_s"),
        "lora_over_full_memory": rec["ratios"]["lora_over_full"].get("cuda_peak_mib")}
    rec = _load(results, "lora")
    out["lora"] = None if rec is None else {
        model: {k: r.get(k) for k in ("tokens_per_s", "cuda_peak_mib", "trainable_parameters")}
        for model, r in rec["ratio_lora_over_full"].items()}
    rec = _load(results, "store_read")
    if rec is None:
        out["store"] = None
    else:
        workers = next((k for k in rec["read_blocks_per_s"] if "workers" in k), None)
        measured = {k: v for k, v in rec["demand_blocks_per_s"].items() if k.endswith("nbkit arm")}
        out["store"] = {"reader": workers, "read_blocks_per_s": rec["read_blocks_per_s"].get(workers),
                        "consumed_blocks_per_s": measured,
                        "read_over_consumed": {k: rec["read_blocks_per_s"][workers] / v for k, v in measured.items()}
                        if workers else None}
    return out


def main(argv=None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, help="the folder holding issue51.tgz and summary.txt ($OUT of the run)")
    ap.add_argument("--machine", required=True, help='e.g. "1 x NVIDIA H100 80GB HBM3, 16 CPUs"')
    ap.add_argument("--out", type=Path, default=None, help="default bench/results/issue51_<device>_<date>")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "session"
        with tarfile.open(a.files / "issue51.tgz") as tar:
            tar.extractall(staging, filter="data")
        device = "cuda" if any(staging.glob("results/*_cuda_*.json")) else "cpu"
        out = a.out or ROOT / "bench" / "results" / f"issue51_{device}_{time.strftime('%Y-%m-%d')}"
        if out.exists():
            raise SystemExit(f"{out} exists: a recorded session is not overwritten; pass another --out")
        shutil.copy(a.files / "summary.txt", staging / "summary.txt")
        jsonio.write_json(staging / "headline.json", {"machine": a.machine, "device": device,
                                                      **headline(staging / "results"),
                                                      "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, out)
    print(f"recorded in {out}")
    return out


if __name__ == "__main__":
    main()
