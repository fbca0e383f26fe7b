"""Benchmark: continued MLM pretraining of a published-layout checkpoint, nbkit's loop vs ``transformers.Trainer``.

Both arms start from the same checkpoint (a stand-in in bert-base-chinese's layout: 21,128-token vocabulary,
512 positions, BERT-base sizes with ``--size base``; ``nbkit.models.standin``), read the same store (the
training reviews prepared with the checkpoint's tokenizer by ``nbkit.recipes.pretraining.data``) through the
same whole-word masking collator, at the same batch, block size, lr 5e-5, AdamW, clipping 1.0 and precision
(fp32 on a CPU, bf16 on a bf16 GPU). nbkit: the recipe's model (``SparseHeadBertForMaskedLM``: the MLM head on
the masked positions only) in ``nbkit.train.Loop``; Trainer: ``BertForMaskedLM.from_pretrained`` (its head on
every position), as a Trainer user runs it. Each arm runs in its own process (``--arm``) so peak memory is its
own: resident set size sampled every 20 ms on a CPU (peak and the rise over the loaded model), CUDA's
``max_memory_allocated`` on a GPU. Tokens/s: ``batch x block`` over the median step time (after ``--warmup``
steps), and over the timed wall time; the arms alternate for ``--rounds`` rounds, and the ratio is given per round
(both arms of a round ran minutes apart: a shared machine's load moves both alike) and over the medians.

    python bench/continued_pretraining.py                          # BERT-base-sized, CPU, 2 threads
    python bench/continued_pretraining.py --size tiny --steps 20   # hidden 32: seconds
    python bench/continued_pretraining.py --device cuda --batch 64 --steps 50

Writes ``--out`` (strict JSON, default ``bench/results/continued_pretraining_<device>_<date>.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class Peak:
    """Peak memory while training: RSS (MiB, /proc/self/statm every 20 ms) on a CPU, CUDA's peak allocation."""

    def __init__(self, device: str):
        import torch

        self.device, self.cuda = device, device.startswith("cuda")
        self.before = self._rss()
        self.peak = self.before
        self._stop = threading.Event()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.cuda_before = torch.cuda.memory_allocated() / 2**20
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    @staticmethod
    def _rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def stop(self) -> dict:
        import torch

        self._stop.set()
        self._thread.join()
        out = {"rss_before_mib": self.before, "peak_rss_mib": max(self.peak, self._rss())}
        out["rss_rise_mib"] = out["peak_rss_mib"] - self.before
        if self.cuda:
            out.update(cuda_before_mib=self.cuda_before, cuda_peak_mib=torch.cuda.max_memory_allocated() / 2**20)
            out["cuda_rise_mib"] = out["cuda_peak_mib"] - self.cuda_before
        return out


class StepClock:
    """End time of every step from ``warmup`` on: median step time and wall time of the timed steps (s)."""

    def __init__(self, warmup: int):
        self.warmup, self.marks = warmup, []

    def mark(self, step: int) -> None:
        if step >= self.warmup:
            self.marks.append(time.perf_counter())

    def summary(self, tokens_per_step: int) -> dict:
        steps = [b - a for a, b in zip(self.marks, self.marks[1:])]
        med, wall = statistics.median(steps), self.marks[-1] - self.marks[0]
        return {"timed_steps": len(steps), "median_step_s": med, "wall_s": wall,
                "tokens_per_s": tokens_per_step / med, "tokens_per_s_wall": tokens_per_step * len(steps) / wall}


def device_and_precision(device: str) -> tuple[str, str]:
    """``device`` with ``auto`` resolved (CUDA when usable, else CPU), and the precision every arm of a comparison
    trains at there: bf16 on a GPU that has it, else fp32."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return device, "bf16" if device.startswith("cuda") and torch.cuda.is_bf16_supported() else "fp32"


def with_mfu(result: dict, flops_per_token: float, device: str) -> dict:
    """``result`` (an arm's, with ``tokens_per_s`` and ``precision``) plus ``flops_per_token`` (the FLOPs its step
    executes per token), ``achieved_tflops``, ``peak_tflops`` and ``mfu``: PaLM's model FLOPs utilisation over the
    GPU's dense peak at that precision (``nbkit.models.flops``); ``peak_tflops`` and ``mfu`` are None off a known
    GPU."""
    import torch

    from nbkit.models.flops import mfu, peak_tflops

    peak = peak_tflops(torch.cuda.get_device_name(), result["precision"]) if device.startswith("cuda") else None
    tps = result["tokens_per_s"]
    return {**result, "flops_per_token": flops_per_token, "achieved_tflops": tps * flops_per_token / 1e12,
            "peak_tflops": peak, "mfu": mfu(tps, flops_per_token, peak)}


class LoopFlops:
    """The FLOPs and tokens of the steps ``Loop.fit`` ran from ``warmup`` on, as the loop counts them for its own MFU
    line (``loop.last_step``: the MLM head on the rows it ran on); call :meth:`mark` from ``on_step_end``."""

    def __init__(self, warmup: int):
        self.warmup, self.flops, self.tokens = warmup, 0.0, 0

    def mark(self, loop) -> None:
        if loop.state.step > self.warmup:
            self.flops += loop.last_step["flops"]
            self.tokens += loop.last_step["tokens"]

    def per_token(self) -> float:
        return self.flops / self.tokens


def recipe(a):
    """The continued-pretraining config both arms read their settings from."""
    from nbkit.recipes.pretraining import PretrainConfig

    return PretrainConfig.for_scale("cpu", init=a.standin, corpus=a.store, batch_size=a.batch, block_size=a.block,
                                    max_steps=a.warmup + a.steps, precision=a.precision, progress=False,
                                    fit_to_corpus=False, num_workers=0)


def arm_nbkit(a) -> dict:
    import dataclasses

    from nbkit.recipes import pretraining as pt
    from nbkit.train import Loop

    cfg = recipe(a)
    corpus = pt.PretrainCorpus(store=Path(a.store))
    tok = pt.tokenizer(cfg, corpus)
    blocks = pt.blocks(cfg, tok, corpus)
    model = pt.model(cfg, tok)
    tcfg = dataclasses.replace(pt.train_config(cfg, tempfile.mkdtemp()), output_dir=None, eval_every=None,
                               checkpoint_every=None, keep_steps=(), log_every=10**6)
    clock, flops = StepClock(a.warmup), LoopFlops(a.warmup)

    class Hook:
        def on_step_end(self, loop):
            if loop.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            clock.mark(loop.state.step)
            flops.mark(loop)

    loop = Loop(model, tcfg, blocks["train"], None, collate_fn=pt.collator(cfg, tok), callbacks=[Hook()],
                device=a.device)
    loop.setup()                                   # the model on its device before the memory baseline
    peak = Peak(a.device)
    result = loop.fit()
    return with_mfu({**clock.summary(a.batch * a.block), **peak.stop(), "precision": result.metrics["precision"],
                     "train_loss": result.metrics["train_loss"], "model_class": type(model).__name__,
                     "n_parameters": sum(p.numel() for p in model.parameters())}, flops.per_token(), a.device)


def arm_trainer(a) -> dict:
    import torch
    from transformers import BertForMaskedLM, Trainer, TrainerCallback, TrainingArguments

    from nbkit.recipes import pretraining as pt

    cfg = recipe(a)
    corpus = pt.PretrainCorpus(store=Path(a.store))
    tok = pt.tokenizer(cfg, corpus)
    blocks = pt.blocks(cfg, tok, corpus)
    model = BertForMaskedLM.from_pretrained(a.standin, attn_implementation="sdpa")
    clock = StepClock(a.warmup)

    class Hook(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if a.device.startswith("cuda"):
                torch.cuda.synchronize()
            clock.mark(state.global_step)

    cuda = a.device.startswith("cuda")
    bf16 = cuda and torch.cuda.is_bf16_supported() and a.precision in ("auto", "bf16")
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=a.warmup + a.steps, per_device_train_batch_size=a.batch,
                                 learning_rate=cfg.lr, warmup_steps=cfg.warmup_ratio, weight_decay=cfg.weight_decay,
                                 lr_scheduler_type="linear", max_grad_norm=1.0, logging_steps=10**6,
                                 save_strategy="no", report_to=[], use_cpu=not cuda, bf16=bf16,
                                 disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=False)
        trainer = Trainer(model=model, args=args, train_dataset=blocks["train"], data_collator=pt.collator(cfg, tok),
                          callbacks=[Hook()])
        model.to(a.device)
        peak = Peak(a.device)
        out_ = trainer.train()
    from nbkit.models.flops import bert_flops_per_token

    return with_mfu({**clock.summary(a.batch * a.block), **peak.stop(), "precision": "bf16" if bf16 else "fp32",
                     "train_loss": out_.training_loss, "model_class": type(model).__name__,
                     "n_parameters": sum(p.numel() for p in model.parameters())},
                    bert_flops_per_token(model.config, a.block), a.device)   # its MLM head on every position


def prepare(a) -> None:
    """The stand-in (``a.standin``) and the store of training reviews prepared with its tokenizer (``a.store``)."""
    from nbkit.data.corpora import load_sentiment
    from nbkit.models.standin import BASE_SIZES, build_standin
    from nbkit.recipes import pretraining as pt

    work = Path(a.work)
    standin = work / f"standin-{a.size}"
    if not (standin / "config.json").is_file():
        build_standin(standin, **(BASE_SIZES if a.size == "base" else {}))
    texts = work / "reviews_train.txt"
    if not texts.is_file():
        train = load_sentiment(seed=0).splits["train"]["text"]
        texts.write_text("".join(t.replace("\n", " ") + "\n" for t in train), encoding="utf-8")
    a.standin = str(standin)
    a.store = str(texts)
    a.store = str(pt.data(recipe(a)).store)


def alternate(script: str, common: list[str], rounds: int) -> dict[str, list[dict]]:
    """Run ``script --arm nbkit|trainer --result R.json *common`` ``rounds`` times each, alternating which arm
    goes first, each in its own process (so peak memory is its own); print one line per run; return the
    results by arm."""
    runs: dict[str, list[dict]] = {"nbkit": [], "trainer": []}
    for r in range(rounds):
        for arm in (("nbkit", "trainer") if r % 2 == 0 else ("trainer", "nbkit")):
            with tempfile.TemporaryDirectory() as tmp:
                res = Path(tmp) / "r.json"
                subprocess.run([sys.executable, script, "--arm", arm, "--result", str(res), *common], check=True,
                               cwd=ROOT)
                runs[arm].append(json.loads(res.read_text()))
            x = runs[arm][-1]
            mem = f"peak CUDA {x['cuda_peak_mib']:,.0f} MiB" if "cuda_peak_mib" in x else \
                f"peak RSS {x['peak_rss_mib']:,.0f} MiB (+{x['rss_rise_mib']:,.0f} training)"
            print(f"round {r + 1} {arm:8s} {x['tokens_per_s']:9,.0f} tokens/s (median step {x['median_step_s']:.2f} s), "
                  f"{mem}, {x['precision']}", flush=True)
    return runs


def compare(runs: dict[str, list[dict]]) -> tuple[dict, dict]:
    """``(medians by arm, nbkit/Trainer ratios)`` of :func:`alternate`'s runs (tokens/s by median step, per
    round and wall; peak memory and its rise), printed as a table."""
    med = {arm: {k: statistics.median(x[k] for x in rs) for k in rs[0] if isinstance(rs[0][k], (int, float))}
           for arm, rs in runs.items()}
    mem_key = "cuda_peak_mib" if "cuda_peak_mib" in med["nbkit"] else "peak_rss_mib"
    rise_key = "cuda_rise_mib" if mem_key == "cuda_peak_mib" else "rss_rise_mib"
    paired = [n["tokens_per_s"] / t["tokens_per_s"] for n, t in zip(runs["nbkit"], runs["trainer"])]   # per round
    ratios = {"tokens_per_s": med["nbkit"]["tokens_per_s"] / med["trainer"]["tokens_per_s"],
              "tokens_per_s_per_round": paired, "tokens_per_s_best": max(x["tokens_per_s"] for x in runs["nbkit"])
              / max(x["tokens_per_s"] for x in runs["trainer"]),
              "tokens_per_s_wall": med["nbkit"]["tokens_per_s_wall"] / med["trainer"]["tokens_per_s_wall"],
              mem_key: med["nbkit"][mem_key] / med["trainer"][mem_key],
              rise_key: med["nbkit"][rise_key] / med["trainer"][rise_key]}
    print(f"\n{'':24s}{'nbkit':>14s}{'Trainer':>14s}{'nbkit/Trainer':>15s}")
    for key, label in (("tokens_per_s", "tokens/s (median step)"), ("tokens_per_s_wall", "tokens/s (wall)"),
                       (mem_key, f"{mem_key} "), (rise_key, f"{rise_key} ")):
        print(f"{label:24s}{med['nbkit'][key]:14,.0f}{med['trainer'][key]:14,.0f}{ratios[key]:15.3f}")
    print(f"tokens/s ratio per round (same load): {', '.join(f'{r:.3f}' for r in paired)}; best run of each: "
          f"{ratios['tokens_per_s_best']:.3f}")
    if med["nbkit"].get("mfu") is not None:
        print("MFU (the FLOPs each arm's step executes, over the GPU's dense peak): "
              + ", ".join(f"{arm} {100 * med[arm]['mfu']:.1f} % ({med[arm]['achieved_tflops']:.0f} TFLOP/s)"
                          for arm in ("nbkit", "trainer") if med[arm].get("mfu") is not None))
    return med, ratios


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("base", "tiny"), default="base", help="stand-in sizes: BERT-base or hidden 32")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per arm")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1, help="arms alternate, in rotating order")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, or auto")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--work", default="runs/bench_continued")
    ap.add_argument("--out", default=None)
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2-core CPU, nothing else running"')
    ap.add_argument("--arm", choices=("nbkit", "trainer"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--standin", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.arm:                                   # a child: one arm, its result as JSON
        from nbkit import jsonio

        jsonio.write_json(a.result, (arm_nbkit if a.arm == "nbkit" else arm_trainer)(a))
        return
    prepare(a)
    common = ["--size", a.size, "--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(a.batch),
              "--block", str(a.block), "--threads", str(a.threads), "--device", a.device, "--precision", a.precision,
              "--standin", a.standin, "--store", a.store]
    runs = alternate(__file__, common, a.rounds)
    med, ratios = compare(runs)
    from nbkit import jsonio

    conf = json.loads((Path(a.standin) / "config.json").read_text())
    out = a.out or str(ROOT / "bench" / "results" / f"continued_pretraining_{a.device}_{time.strftime('%Y-%m-%d')}.json")
    jsonio.write_json(out, {
        "what": "continued MLM pretraining of a stand-in in bert-base-chinese's layout: nbkit Loop (sparse MLM head) "
                "vs transformers.Trainer (BertForMaskedLM), same store, collator, batch, lr, precision",
        "checkpoint": {k: conf[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                            "intermediate_size", "max_position_embeddings")},
        "size": a.size, "device": a.device, "threads": a.threads, "batch": a.batch, "block": a.block,
        "tokens_per_step": a.batch * a.block, "warmup_steps": a.warmup, "timed_steps": a.steps, "rounds": a.rounds,
        "runs": runs, "median": med, "ratio_nbkit_over_trainer": ratios,
        "machine": a.machine or f"{os.cpu_count()} CPUs", "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
