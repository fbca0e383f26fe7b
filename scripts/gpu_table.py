"""The GPU block of docs/running.md and its front-page headline, from a recorded GPU session's ``session.json``
(``bench/gpu_session/record.py``).

Every number comes from the file; ``scripts/expect_table.py`` writes the block between the ``gpu-table`` markers
and the headline between the ``gpu-headline`` markers of both READMEs. The newest
``bench/results/gpu_*/session.json`` is used unless a path is given.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import markers, newest, num, rel  # noqa: E402

START, END = markers("gpu-table", "expect_table.py")
HEAD_START, HEAD_END = markers("gpu-headline", "expect_table.py")
FILES = [ROOT / "docs" / "running.md"]


def latest_session(root: Path = ROOT) -> Path:
    """The newest recorded session (folders are named ``gpu_<device>_<date>``).

    Raises:
        FileNotFoundError: no ``bench/results/gpu_*/session.json``.
    """
    return newest("gpu_*/session.json", root, missing="record a GPU session (bench/gpu_session/record.py) first")


def _secs(timings: dict) -> str:
    s = (timings or {}).get("seconds") or {}
    return ", ".join(f"{k} {v:.0f} s" for k, v in sorted(s.items())) or "n/a"


def render(path: Path) -> str:
    """Intro line + table of the session's measured numbers."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    g, nv, pt = d["gpu_check"], d["nvml"], d["pytest_gpu"]
    rows = [("`pytest -m gpu`", f"{pt.get('passed', 0)} passed, {pt.get('failed', 0)} failed")]
    for key, label in (("bert_eager", "eager"), ("bert_compiled", "`torch.compile`")):
        r = g.get(key)
        if r:
            step = (f"`Loop.train_step` (MLM head: {r['mlm_head']})" if r.get("mlm_head")  # since the one step
                    else "SDPA + fused AdamW, timed on profiling's own side step, not the loop's")  # older records
            rows.append((f"BERT-base MLM, {r['seq_len']} tokens, {r['precision']}, batch {r['batch_size']}, "
                         f"{step}, {label}",
                         f"{num(r['tokens_per_s'])} tokens/s, MFU {num(100 * r['mfu'], '.1f', ' %')}, "
                         f"step {num(r['step_ms'], '.1f', ' ms')}, peak memory {num(r['peak_memory_mib'], ',.0f', ' MiB')}"))
    head = {r["value"]: r for r in g.get("mlm_head") or []}
    if {"all", "masked"} <= head.keys():
        a, m = head["all"], head["masked"]
        rows.append((f"MLM head on masked positions only vs all, batch {a['batch_size']}",
                     f"{num(m['tokens_per_s'])} vs {num(a['tokens_per_s'])} tokens/s "
                     f"(x{m['tokens_per_s'] / a['tokens_per_s']:.2f})"))
    big = max(g.get("matmul_bf16") or [], key=lambda r: r["n"], default=None)
    if big:
        rows.append((f"bf16 matmul {big['n']}³", f"{num(big['tflops'], '.0f')} TFLOP/s "
                     f"({num(big['pct_of_peak'], '.1f')} % of the datasheet's dense peak)"))
    flash = {r["seq_len"]: r for r in g.get("sdpa") or [] if r["backend"] == "flash"}
    if flash:
        rows.append(("SDPA flash vs math backend", ", ".join(f"x{num(r['speedup_vs_math'], '.1f')} at {t} tokens"
                                                             for t, r in sorted(flash.items()))))
    if "nvml_sample_ms" in nv:
        rows.append(("one NVML sample vs one `nvidia-smi --query-gpu` call",
                     f"{nv['nvml_sample_ms']:.2f} ms vs {nv['smi_call_ms']:.1f} ms (x{nv['smi_over_nvml']:.0f}); "
                     f"with PCIe throughput (two 20 ms NVML windows) {nv.get('nvml_sample_pcie_ms', 0):.1f} ms"))
    if "with_over_without" in nv:
        rows.append(("training with the 1 s GPU monitor vs without (tiny BERT, launch-bound)",
                     f"ratio {nv['with_over_without']:.3f} (run-to-run spread {nv['spread_without_pct']:.0f} %); "
                     f"the sampler thread used {nv['sampler_cpu_pct']:.2f} % of the run's CPU time"))
    if g.get("profile_kernel_check"):
        rows.append(("`torch.profiler` CUDA events", g["profile_kernel_check"]))
    nb = d.get("notebooks") or {}
    mlm, sent = nb.get("mlm") or {}, nb.get("sentiment") or {}
    if mlm:
        rows.append((f"notebooks at the old `gpu` preset (BERT-{mlm['model']}, lr {mlm['lr']:g}, "
                     f"{mlm['steps']:,} steps)",
                     f"{_secs(nb.get('timings'))}; held-out MLM loss {mlm['untrained_eval_loss']:.2f} -> "
                     f"{mlm['first_eval_loss']:.2f} at step {mlm['first_eval_step']:,} -> {mlm['eval_loss']:.2f} at "
                     f"step {mlm['steps']:,}, {num(mlm['tokens_per_s'])} tokens/s; "
                     f"fine-tuned test accuracy {num(sent.get('test_accuracy'), '.3f')} vs TF-IDF "
                     f"{num(sent.get('baseline_accuracy'), '.3f')}"))
    nb2 = d.get("notebooks_preset_run") or {}
    m2 = nb2.get("mlm") or {}
    if m2:
        rows.append((f"notebooks at today's `gpu` preset (BERT L{m2['layers']}/H{m2['hidden_size']}, lr {m2['lr']:g}, "
                     f"{m2['steps']:,} steps), GPU shared with the benchmark below",
                     f"{_secs(nb2.get('timings'))}; held-out MLM loss {m2['untrained_eval_loss']:.2f} -> "
                     f"{m2['eval_loss']:.2f} (perplexity {m2['eval_perplexity']:.0f}), "
                     f"{num(m2['tokens_per_s'])} tokens/s"))
    lines = [f"On {d['machine']} (`{rel(Path(path).parent)}`):",
             "", "| measured | result |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in rows]
    lines += [f"\n{n}" for n in d.get("notes") or []]
    return "\n".join(lines)


def headline(path: Path) -> str:
    """The front page's line: BERT-base MLM throughput and MFU of the session's eager run, and its GPU tests."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    r, pt = d["gpu_check"].get("bert_eager") or {}, d["pytest_gpu"]
    speed = (f"BERT-base MLM at **{num(r.get('tokens_per_s'))} tokens/s, MFU {num(r.get('mfu') and 100 * r['mfu'], '.1f')} %** "
             f"({r.get('precision', 'n/a')}, batch {r.get('batch_size', 'n/a')} x {r.get('seq_len', 'n/a')} tokens); " if r else "")
    return (f"On {d['machine'].split(' (')[0]}: {speed}`pytest -m gpu` {pt.get('passed', 0)} passed, "
            f"{pt.get('failed', 0)} failed (`{rel(Path(path).parent)}`).")
