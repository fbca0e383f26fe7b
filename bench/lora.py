"""Benchmark: LoRA (``nbkit.models.lora.apply_lora``, peft) against full fine-tuning, in nbkit's loop.

Two models, each built from config with nbkit's presets (random weights: the speed and memory of a step do not
depend on them): a BERT sentence classifier (``BertForSequenceClassification``, preset ``--bert``, 2 classes) and
a GPT-2 causal LM (``GPT2LMHeadModel``, preset ``--gpt``), over a ``--vocab``-token vocabulary. Each trains on
the same random token ids (``--batch`` x ``--block`` per step, every position real) in ``nbkit.train.Loop`` at
fp32, AdamW, clipping 1.0: the full model (every weight trains), or ``apply_lora(model, r=--rank)`` (the default
targets: every attention projection; a classifier's head trains too).

Measured per run, each in its own process so that peak memory is its own: trainable parameters; tokens/s =
``batch x block`` over the median step time after ``--warmup`` steps (``StepClock``); peak resident set size,
sampled every 20 ms from ``/proc/self/statm`` (``Peak``: on a CPU, the whole process, Python and torch included),
and its rise over the RSS after the model is built and in the loop (``rss_rise_mib``: what training adds, i.e.
gradients, AdamW's two moments and activations). The four (model, method) runs of a round run one after another
(full first in odd rounds, LoRA first in even ones), for ``--rounds`` rounds; ratios are LoRA over full, per
round and over the medians. On a shared CPU the timings are noisy: read the per-round ratios beside the medians.

    OMP_NUM_THREADS=1 python bench/lora.py                # bert mini + gpt2-mini, 2 rounds, about 5 minutes
    python bench/lora.py --bert tiny --gpt gpt2-tiny --steps 4 --rounds 1   # under 2 minutes
    python bench/lora.py --device cuda --bert base --gpt gpt2-small --batch 32 --rounds 1   # bf16, CUDA peak memory

Writes ``--out`` (strict JSON through ``nbkit.jsonio``, default ``bench/results/lora_<device>_<date>.json``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from continued_pretraining import Peak, StepClock, device_and_precision  # noqa: E402

MODELS, METHODS = ("bert", "gpt2"), ("full", "lora")


def build(a, kind: str):
    """The randomly initialised model of ``kind`` (seed 0) and its collate function for random ids."""
    import torch
    from transformers import BertForSequenceClassification, GPT2LMHeadModel

    from nbkit.models.bert import build_config
    from nbkit.models.causal import build_causal_config
    from nbkit.models.loading import seeded

    with seeded(0):
        if kind == "bert":
            model = BertForSequenceClassification(build_config(a.bert, a.vocab, num_labels=2))
        else:
            model = GPT2LMHeadModel(build_causal_config(a.gpt, a.vocab, block_size=a.block, pad_token_id=0,
                                                        bos_token_id=2, eos_token_id=3))   # a BERT vocabulary's

    def collate(examples):
        ids = torch.stack([e["input_ids"] for e in examples])                          # (B, T)
        if kind == "bert":
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                    "labels": torch.stack([e["label"] for e in examples])}             # (B,)
        return {"input_ids": ids, "labels": torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -100)], 1)}

    return model, collate


def run(a) -> dict:
    """One (model, method) run in this process: its speed, memory and parameter counts."""
    import torch

    from nbkit.models.lora import apply_lora, trainable_parameters
    from nbkit.train import Loop, TrainConfig

    model, collate = build(a, a.model)
    if a.method == "lora":
        model = apply_lora(model, r=a.rank, alpha=2 * a.rank)
    g = torch.Generator().manual_seed(1)
    n = a.batch * (a.warmup + a.steps)
    data = [{"input_ids": torch.randint(1, a.vocab, (a.block,), generator=g), "label": torch.tensor(i % 2)}
            for i in range(n)]
    clock = StepClock(a.warmup)

    class Hook:
        def on_step_end(self, loop):
            clock.mark(loop.state.step)

    cfg = TrainConfig(max_steps=a.warmup + a.steps, batch_size=a.batch, lr=5e-4, output_dir=None, progress=False,
                      progress_every_s=None, log_every=10**6, checkpoint_minutes=None, precision=a.precision)
    loop = Loop(model, cfg, data, collate_fn=collate, callbacks=[Hook()], device=a.device)
    loop.setup()
    peak = Peak(a.device)
    result = loop.fit()
    return {"model": a.model, "method": a.method, **clock.summary(a.batch * a.block), **peak.stop(),
            **{f"{k}_parameters" if k != "share" else "trainable_share": v
               for k, v in trainable_parameters(model).items()},
            "train_loss": result.metrics["train_loss"], "model_class": type(model).__name__,
            "fused_loss": loop._fused_weight is not None}


def alternate(a) -> dict[str, list[dict]]:
    """Every (model, method) run once per round, each in its own process; full first in odd rounds."""
    from nbkit import jsonio

    runs: dict[str, list[dict]] = {f"{m}/{k}": [] for m in MODELS for k in METHODS}
    common = ["--bert", a.bert, "--gpt", a.gpt, "--vocab", str(a.vocab), "--batch", str(a.batch), "--block",
              str(a.block), "--steps", str(a.steps), "--warmup", str(a.warmup), "--rank", str(a.rank),
              "--threads", str(a.threads), "--device", a.device]
    for r in range(a.rounds):
        for model in MODELS:
            for method in METHODS if r % 2 == 0 else METHODS[::-1]:
                with tempfile.TemporaryDirectory() as tmp:
                    res = Path(tmp) / "r.json"
                    subprocess.run([sys.executable, __file__, "--model", model, "--method", method, "--result",
                                    str(res), *common], check=True, cwd=ROOT)
                    x = jsonio.loads_strict(res.read_text(encoding="utf-8"))
                runs[f"{model}/{method}"].append(x)
                print(f"round {r + 1} {model:5s} {method:5s} {x['tokens_per_s']:8,.0f} tokens/s (median step "
                      f"{x['median_step_s']:.3f} s), peak RSS {x['peak_rss_mib']:6,.0f} MiB (+{x['rss_rise_mib']:,.0f} "
                      f"training), trainable {x['trainable_parameters']:,} of {x['total_parameters']:,}"
                      + (f", peak CUDA {x['cuda_peak_mib']:,.0f} MiB" if "cuda_peak_mib" in x else ""), flush=True)
    return runs


def compare(runs: dict[str, list[dict]]) -> tuple[dict, dict]:
    """``(medians by run, LoRA/full ratios by model)``, printed as a table."""
    keys = ("tokens_per_s", "tokens_per_s_wall", "peak_rss_mib", "rss_rise_mib", "trainable_parameters",
            "total_parameters")
    keys += tuple(k for k in ("cuda_peak_mib", "cuda_rise_mib") if k in next(iter(runs.values()))[0])
    med = {name: {k: statistics.median(x[k] for x in rs) for k in keys} for name, rs in runs.items()}
    ratios = {}
    print(f"\n{'':26s}{'full':>14s}{'LoRA':>14s}{'LoRA/full':>11s}")
    for model in MODELS:
        full, lora = med[f"{model}/full"], med[f"{model}/lora"]
        ratios[model] = {k: lora[k] / full[k] for k in keys}
        ratios[model]["tokens_per_s_per_round"] = [b["tokens_per_s"] / f["tokens_per_s"] for f, b in
                                                   zip(runs[f"{model}/full"], runs[f"{model}/lora"])]
        for k in keys:
            print(f"{model + ' ' + k:26s}{full[k]:14,.0f}{lora[k]:14,.0f}{ratios[model][k]:11.3f}")
        print(f"{model} tokens/s LoRA/full per round: "
              f"{', '.join(f'{v:.3f}' for v in ratios[model]['tokens_per_s_per_round'])}")
    return med, ratios


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bert", default="mini", help="nbkit.models.bert.PRESETS name")
    ap.add_argument("--gpt", default="gpt2-mini", help="nbkit.models.causal.PRESETS name")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rank", type=int, default=8, help="LoRA r (alpha = 2 r)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, or auto (bf16 on a bf16 GPU, else fp32)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2 cores shared with 6 jobs"')
    ap.add_argument("--model", choices=MODELS, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--method", choices=METHODS, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    import torch

    from nbkit import jsonio

    torch.set_num_threads(a.threads)
    a.device, a.precision = device_and_precision(a.device)
    if a.model:                                  # a child: one run, its result as JSON
        jsonio.write_json(a.result, run(a))
        return
    t0 = time.perf_counter()
    runs = alternate(a)
    med, ratios = compare(runs)
    out = a.out or str(ROOT / "bench" / "results" / f"lora_{a.device.split(':')[0]}_{time.strftime('%Y-%m-%d')}.json")
    jsonio.write_json(out, {
        "what": "LoRA (nbkit.models.lora.apply_lora through peft, default targets: every attention projection) vs "
                "full fine-tuning in nbkit.train.Loop, same model, random ids, batch, block, lr, precision",
        "models": {"bert": f"BertForSequenceClassification, preset {a.bert}, 2 classes",
                   "gpt2": f"GPT2LMHeadModel, preset {a.gpt}"},
        "vocab": a.vocab, "batch": a.batch, "block": a.block, "tokens_per_step": a.batch * a.block,
        "warmup_steps": a.warmup, "timed_steps": a.steps, "lora_r": a.rank, "lora_alpha": 2 * a.rank,
        "rounds": a.rounds, "device": a.device, "precision": a.precision, "threads": a.threads,
        "memory": "peak RSS of each run's own process, /proc/self/statm sampled every 20 ms (bench/continued_"
                  "pretraining.py Peak); rss_rise_mib: over the RSS with the model built and in the loop; on a GPU "
                  "also cuda_peak_mib (torch.cuda.max_memory_allocated) and cuda_rise_mib over the model in the loop",
        "tokens_per_s": "batch x block over the median step time after the warm-up steps",
        "noise": "compare the per-round ratios: a shared machine's load moves both runs of a round alike",
        "runs": runs, "median": med, "ratio_lora_over_full": ratios, "seconds": time.perf_counter() - t0,
        "machine": a.machine or f"{os.cpu_count()} CPUs", "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    print(f"wrote {out} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
