"""Notebook 06's causal recipe over several seeds: the GPT's held-out perplexity beside the 2- and 3-gram.

Runs what notebook 06 runs, through nbkit's recipe functions (``pt.data``, ``pt.tokenizer``, ``pt.size``,
``pt.blocks``, ``pt.model``, ``pt.train``; ``nbkit.evaluate.ngram.causal_baselines``) at ``--scale``, once per
seed. The seed changes the model's initial weights and the block order, and (through the recipe) the corpus
sample, so each seed fits its own n-gram baselines on its training text and scores them on its GPT's held-out
targets (``--split-seed`` fixes the split seed). Each seed writes ``<out>/seed<N>.json`` (its own process may run it under its
own CPU-lock hold); ``--summary`` combines the seeds found into ``<out>.json``: mean, sample standard deviation,
min and max of the GPT's and each baseline's perplexity, per seed everything recorded (perplexities, training
seconds, tokens each model read), and whether the GPT beats each baseline on the mean and in every seed.

    python bench/causal_seeds.py --scale cpu --seed 0          # one seed (repeat for 1, 2)
    python bench/causal_seeds.py --scale cpu --summary         # bench/results/causal_seeds_cpu_<date>.json

``--max-steps``, ``--lr``, ``--dropout`` and ``--eval-every`` override the scale's (None: the recipe's); each seed
records its learning curve (held-out perplexity at every evaluation, by training tokens), which
``scripts/causal_curve.py`` draws beside the n-gram lines:

    python bench/causal_seeds.py --scale cpu --seed 0 --max-steps 1700 --eval-every 170 --out bench/results/causal_curve_cpu_<date>
 ``scripts/causal_table.py`` renders the summary.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def run_seed(a) -> dict:
    """One seed of the recipe: train, evaluate, and (same split, so the same for every seed) the baselines."""
    from nbkit.evaluate.ngram import causal_baselines
    from nbkit.recipes import pretraining as pt

    extra = {k: v for k, v in (("lr", a.lr), ("dropout", a.dropout), ("eval_every", a.eval_every)) if v is not None}
    cfg = pt.PretrainConfig.for_scale(a.scale, objective="causal", seed=a.seed, split_seed=a.split_seed,
                                      max_steps=a.max_steps, progress=False, **extra)
    corpus = pt.data(cfg)
    tok = pt.tokenizer(cfg, corpus)
    cfg, _ = pt.size(cfg, corpus)
    blocks = pt.blocks(cfg, tok, corpus)
    gpt = pt.model(cfg, tok)
    out_dir = Path(tempfile.mkdtemp(prefix=f"causal-seed{a.seed}-"))   # a fresh run: nothing to resume
    t0 = time.perf_counter()
    loop, result = pt.train(cfg, gpt, tok, blocks, out_dir, untrained=False)
    train_s = time.perf_counter() - t0
    last = [h for h in result.history if "eval_loss" in h][-1]
    scored = loop.config.eval_batches * cfg.batch_size if loop.config.eval_batches else None
    baselines = causal_baselines(blocks, len(tok), (2, 3), max_eval_blocks=scored)
    return {"seed": a.seed, "split_seed": a.split_seed, "scale": a.scale, "model": cfg.model,
            "steps": result.metrics["steps"], "lr": cfg.lr, "dropout": cfg.dropout, "batch_size": cfg.batch_size, "block_size": cfg.block_size,
            "train_tokens": result.metrics["train_tokens"], "train_s": train_s,
            "tokens_per_s": result.metrics.get("tokens_per_s"), "eval_perplexity": last["eval_perplexity"],
            "eval_loss": last["eval_loss"], "eval_tokens": last["eval_tokens"],
            "fused_loss": loop._fused_weight is not None, "baselines": baselines,
            # the learning curve: held-out perplexity at every evaluation, by training tokens read and seconds
            "curve": [{"step": h["step"], "train_tokens": h["step"] * cfg.batch_size * cfg.block_size
                       * cfg.grad_accum_steps, "eval_perplexity": h["eval_perplexity"],
                       "elapsed_s": max((g["elapsed_s"] for g in result.history
                                         if "elapsed_s" in g and g["step"] <= h["step"]), default=None)}
                      for h in result.history if "eval_loss" in h]}


def summarize(seeds: list[dict], machine: str) -> dict:
    """The seeds' GPT perplexities beside their baselines: mean, sample sd, min and max of each model's held-out
    perplexity over the seeds, and per baseline whether the GPT's mean is lower and whether it is lower in every
    seed. The recipe's ``seed`` also moves the corpus sample, so each seed has its own held-out targets and its
    own n-gram baselines (fitted on that seed's training text, scored on the GPT's targets).

    Raises:
        ValueError: no seed, or a seed whose baselines scored other targets than its GPT.
    """
    if not seeds:
        raise ValueError("no seed recorded: run bench/causal_seeds.py --seed N first")
    bad = [s["seed"] for s in seeds if any(b["eval_tokens"] != s["eval_tokens"] for b in s["baselines"])]
    if bad:
        raise ValueError(f"seeds {bad}: the baselines scored other held-out targets than the GPT")

    def stats(values):
        return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else None,
                "min": min(values), "max": max(values)}

    gpt = [s["eval_perplexity"] for s in seeds]
    names = [b["model"] for b in seeds[0]["baselines"]]
    base = {m: [next(b for b in s["baselines"] if b["model"] == m) for s in seeds] for m in names}
    return {"what": "notebook 06's causal recipe over seeds: GPT held-out perplexity vs Kneser-Ney 2/3-gram",
            "scale": seeds[0]["scale"], "model": seeds[0]["model"], "n_seeds": len(seeds),
            "gpt_perplexity": stats(gpt),
            "train_s": {"mean": statistics.fmean(s["train_s"] for s in seeds), "max": max(s["train_s"] for s in seeds)},
            "baselines": [{"model": m, "eval_perplexity": stats([b["eval_perplexity"] for b in rows]),
                           "train_tokens": [b["train_tokens"] for b in rows]} for m, rows in base.items()],
            "beats": {m: statistics.fmean(gpt) < statistics.fmean(b["eval_perplexity"] for b in rows)
                      for m, rows in base.items()},
            "beats_every_seed": {m: all(s["eval_perplexity"] < b["eval_perplexity"] for s, b in zip(seeds, rows))
                                 for m, rows in base.items()},
            "seeds": seeds, "machine": machine, "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--seed", type=int, default=None, help="run this seed (one per invocation)")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=None, help="None: the recipe's")
    ap.add_argument("--lr", type=float, default=None, help="None: the recipe's")
    ap.add_argument("--dropout", type=float, default=None, help="None: the recipe's")
    ap.add_argument("--eval-every", type=int, default=None, help="steps between held-out evaluations (the "
                    "learning curve's points); None: the recipe's")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="default bench/results/causal_seeds_<scale>_<date>")
    ap.add_argument("--summary", action="store_true", help="combine the recorded seeds into <out>.json")
    ap.add_argument("--machine", default=f"{os.cpu_count()} CPUs")
    a = ap.parse_args(argv)
    import torch

    from nbkit import jsonio

    torch.set_num_threads(a.threads)
    out = Path(a.out or ROOT / "bench" / "results" / f"causal_seeds_{a.scale}_{time.strftime('%Y-%m-%d')}")
    if a.summary:
        seeds = [jsonio.loads_strict(p.read_text(encoding="utf-8")) for p in sorted(out.glob("seed*.json"))]
        jsonio.write_json(out.with_suffix(".json"), summarize(seeds, a.machine))
        print(f"wrote {out.with_suffix('.json')}")
        return
    if a.seed is None:
        ap.error("give --seed N (one seed per run) or --summary")
    out.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(out / f"seed{a.seed}.json", run_seed(a))
    print(f"wrote {out / f'seed{a.seed}.json'}")


if __name__ == "__main__":
    main()
