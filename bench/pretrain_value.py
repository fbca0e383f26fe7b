"""Benchmark: what is nbkit's own MLM pretraining worth for sentiment fine-tuning?

The same fine-tuning recipe runs from random weights and from checkpoints taken after increasing
amounts of MLM pretraining (one pretraining run, checkpoints at ``--save-steps``), with several seeds
each. It prints validation/test accuracy and macro-F1 (mean +- std over seeds), the difference of the
task's headline metric to random init with a paired bootstrap 95 % interval (test examples resampled,
seeds averaged), pretraining tokens and wall time, and the TF-IDF baseline on the same task, split and
truncation; everything goes to ``<out>/stats.json`` (strict JSON). The recorded run of 2026-11-30 is
``notebooks/data/pretrain_value.json`` (rendered by ``nbkit.evaluate.pretrain_value`` in notebooks 02/03 and the README).

Everything goes through nbkit: ``text.train_wordpiece``, ``text.make_blocks`` + ``MLMCollator``,
``models.build_mlm_model`` / ``build_classifier``, ``train.Loop``, ``evaluate.predict``,
``evaluate.classification_report``, ``pipeline.tasks`` (task data, TF-IDF at the model's cut).

Tasks (``--task``): ``reviews`` (default, 2 balanced classes; headline test accuracy) or ``news``
(optional ``nbkit[news]``: 3 classes positive/neutral/negative, about 10/50/40 %, long documents;
headline test macro-F1, accuracy beside it). Data: the tokenizer is trained once (People's Daily
training lines + training reviews) and reused by every arm and task. Pretraining text (``--corpus``,
default the task's own) is People's Daily (gold word boundaries), a task's TRAINING-split texts
(``reviews``/``news``: domain-adaptive pretraining, Gururangan et al. 2020; jieba words for whole-word
masking), or PD + reviews (``mix``). Validation and test texts are never pretrained on.

    python bench/pretrain_value.py all --out runs/pretrain_value            # the benchmark
    python bench/pretrain_value.py pretrain --out DIR [knobs]               # checkpoints only
    python bench/pretrain_value.py finetune --out DIR --init DIR/checkpoints/step-000500/model --seeds 0,1,2
    python bench/pretrain_value.py report --out DIR                         # table + stats.json
    python bench/pretrain_value.py all --task news --max-length 128 --out runs/pv_news   # the second task
    python bench/pretrain_value.py tapt --out runs/pv_tapt                 # continuing a "published" model

``tapt``: does continuing a published checkpoint on the task's training texts help (task-adaptive pretraining,
Gururangan et al. 2020)? nbkit's own model pretrained on People's Daily (``--published-steps``) stands in for the
published one; it is continued on the training reviews with ``PretrainConfig.init`` (``--tapt-steps``,
``--tapt-lr``), both are fine-tuned with the same seeds, and ``<out>/tapt.json`` holds the paired difference
(continued minus published) with its bootstrap intervals. Recorded 2026-12-02 on the 2-core CPU
(``bench/results/pretrain_value_tapt``): +1.1 points [+0.3, +1.9] over 1.02 M review tokens.

The benchmark is the recipes plus overrides, over seeds: pretraining is
``nbkit.recipes.pretraining.run_pretraining(PretrainConfig.for_scale(scale, **flags))`` and every fine-tune is
``nbkit.recipes.finetuning``'s stages with ``FinetuneConfig.for_scale(scale, **flags)``. It sets no recipe default
of its own: each flag's default is the ``--scale``'s (default ``cpu``) config value, so a flag left out runs
what notebooks 02/03 run (``tests/test_bench_pretrain_value.py`` checks it). ``--save-steps`` defaults to a
quarter, half and all of the recipe's ``max_steps``.
Measured 2026-11-30 (``notebooks/data/pretrain_value.json``, logs in ``bench/results/pretrain_value``): +1.0 points test accuracy at 8.2 M tokens (1 epoch;
+0.9 with 2 epochs), 95 % CI about [+0.0, +2.0]; TF-IDF 0.828 at the same truncation. ``all`` takes about
12 min of pretraining + 12 fine-tunes of ~1 min on one idle core. News: ``bench/results/pretrain_value_news``.
Phases append to ``<out>/finetune.jsonl`` (several one-thread processes can fine-tune side by side).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from bench import pretrain_value_report as pretrain_value  # noqa: E402  (aggregate)
from nbkit import evaluate, jsonio, models, text  # noqa: E402
from nbkit.recipes import finetuning as ft  # noqa: E402
from nbkit.recipes.finetuning import FinetuneConfig  # noqa: E402
from nbkit.recipes.tokenizer import TokenizerConfig  # noqa: E402

SEED_SPLIT = 0          # the task's split (load_sentiment's seed), the same for every arm
DELTA = {"accuracy": "Δtest vs random [95% CI]", "macro_f1": "Δtest F1 vs random [95% CI]"}


# ----- data ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def labeled(task: str):
    """The task's splits (``ft.data``): ``reviews`` (default) or ``news`` (optional package)."""
    return ft.data(FinetuneConfig.for_scale("cpu", task=task, seed=SEED_SPLIT, max_train="all"))


def get_tokenizer(path: pathlib.Path, vocab_size: int, max_positions: int):
    """Train the WordPiece tokenizer once (PD training lines + training reviews) and reuse it."""
    from transformers import AutoTokenizer

    if (path / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(path))
    from nbkit.recipes import tokenizer as tk

    texts, _ = tk.texts(tk.TokenizerConfig.for_scale("cpu"))   # notebook 01's: split seed 0, all lines
    return text.train_wordpiece(texts, vocab_size=vocab_size, out_dir=path, model_max_length=max_positions)


#: bench flag -> PretrainConfig field (nbkit.recipes.pretraining); flags left out keep the scale's recipe
PRETRAIN_FLAGS = {"model": "model", "block": "block_size", "mlm_batch": "batch_size", "mlm_lr": "lr",
                  "mlm_warmup": "warmup_ratio", "mlm_schedule": "scheduler", "mlm_prob": "mlm_probability",
                  "pretrain_seed": "seed"}
#: bench flag -> FinetuneConfig field (nbkit.recipes.finetuning)
FINETUNE_FLAGS = {"model": "model", "max_length": "max_length", "ft_batch": "batch_size", "ft_epochs": "epochs",
                  "ft_lr": "lr", "ft_warmup": "warmup_ratio", "pooling": "pooling",
                  "ft_class_weights": "class_weights"}
#: --corpus -> the pretraining mix (nbkit.recipes.pretraining.SOURCES; a task's TRAINING texts only)
MIXES = {"pd": (("peoples_daily", 1.0),), "reviews": (("reviews", 1.0),), "news": (("news", 1.0),),
         "mix": (("peoples_daily", 1.0), ("reviews", 1.0))}


def scale_recipes(scale_name: str = "cpu"):
    """``(PretrainConfig, FinetuneConfig)`` of the scale: where every flag's default comes from."""
    from nbkit.recipes.pretraining import PretrainConfig

    return PretrainConfig.for_scale(scale_name), FinetuneConfig.for_scale(scale_name)


def device_of(args) -> str:
    """``--device``: ``cpu`` (the recorded runs), ``cuda``, or ``auto`` (CUDA when available)."""
    if args.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return args.device


# ----- phases -------------------------------------------------------------------------------
def model_dir_at(out_dir, step: int) -> pathlib.Path:
    """``out_dir/checkpoints/step-NNNNNN/model``: the ``from_pretrained`` folder of one kept checkpoint.

    Raises:
        CheckpointError: no complete checkpoint at ``step`` (the kept steps are named).
    """
    from nbkit.errors import CheckpointError
    from nbkit.train.checkpoint import list_checkpoints

    found = {c.step: c for c in list_checkpoints(out_dir, warn=False)}
    if step not in found:
        raise CheckpointError(f"no checkpoint at step {step} in {pathlib.Path(out_dir) / 'checkpoints'}; kept: "
                              f"{sorted(found) or 'none'} (pass save_steps=({step},) to run_pretraining)")
    return found[step].model_dir


def pretrain_config(args):
    """The pretraining recipe of ``--scale`` with the flags given, ``--corpus``'s mix and the last save step."""
    from nbkit.recipes.pretraining import PretrainConfig

    save_steps = sorted(int(x) for x in args.save_steps.split(","))
    mix = tuple((name, float(args.review_repeat) if name == "reviews" and args.corpus == "mix" else w)
                for name, w in MIXES[args.corpus])
    flags = {field: getattr(args, flag) for flag, field in PRETRAIN_FLAGS.items()}
    return PretrainConfig.for_scale(args.scale, max_steps=save_steps[-1], mix=mix,
                                    **flags), save_steps


def pretrain(args) -> None:
    """MLM pretraining by the recipe; ``<out>/pretrain.json`` lists the kept checkpoints (report's format)."""
    from nbkit.recipes.pretraining import run_pretraining

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok = get_tokenizer(pathlib.Path(args.tokenizer), args.vocab_size, args.positions)
    cfg, save_steps = pretrain_config(args)
    t0 = time.perf_counter()
    metrics = run_pretraining(cfg, out, tokenizer=tok, save_steps=save_steps)
    wall = time.perf_counter() - t0
    evals = {h["step"]: h["eval_loss"] for h in metrics.get("history", []) if "eval_loss" in h}
    per_step = cfg.batch_size * getattr(cfg, "grad_accum_steps", 1) * cfg.block_size   # tokens per step
    log = [{"step": step, "train_tokens": step * per_step, "dir": str(model_dir_at(out, step)),
            "wall_s": wall * step / max(save_steps[-1], 1), "eval_loss": evals.get(step)} for step in save_steps]
    jsonio.write_json(out / "pretrain.json", {"args": vars(args), "checkpoints": log})
    for e in log:
        print(f"pretrain step {e['step']}: {e['train_tokens']:,} tokens -> {e['dir']}", flush=True)


def finetune_config(args, init: str | None, seed: int) -> FinetuneConfig:
    """The fine-tuning recipe of ``--scale`` with the flags given (``--ft-lr-random`` for the random arm)."""
    lr = args.ft_lr_random if (init is None and args.ft_lr_random) else args.ft_lr
    flags = {field: getattr(args, flag) for flag, field in FINETUNE_FLAGS.items()}
    return FinetuneConfig.for_scale(args.scale, **{**flags, "lr": lr}, seed=seed,
                                    init=init or "random", eval_every=0, checkpoint_every=0, progress=False)


def finetune_one(args, init: str | None, seed: int, tok, s, enc) -> dict:
    """Fine-tune once by the recipe (``init`` None = random weights) and score validation and test."""
    cfg = finetune_config(args, init, seed)
    model, how = ft.model(cfg, tok, s)
    _, res = ft.train(cfg, model, tok, enc, out_dir=None, device=device_of(args))
    scores = ft.evaluate(cfg, model, tok, s, splits=("validation", "test"), baseline=False)
    row = {"init": init or "random", "seed": seed, "lr": cfg.lr, "steps": res.metrics["steps"],
           "epochs": cfg.epochs, "pooling": model.config.classifier_pooling, "max_length": cfg.max_length,
           "finetune_s": res.metrics["finetune_s"], "train_loss": res.metrics["train_loss"], "how": how,
           "tag": args.tag, "task": args.task, "class_weights": cfg.class_weights}
    for split in ("validation", "test"):
        rep = scores[f"{split}_report"]
        row[f"{split}_accuracy"], row[f"{split}_macro_f1"] = rep["accuracy"], rep["macro_f1"]
    row["test_pred"] = scores["test_pred"]
    print(f"{row['init']:>40} seed {seed} lr {cfg.lr:g}: val {row['validation_accuracy']:.4f} "
          f"test {row['test_accuracy']:.4f} F1 {row['test_macro_f1']:.4f}  {row['finetune_s']:.0f} s", flush=True)
    return row


def finetune(args) -> None:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok = get_tokenizer(pathlib.Path(args.tokenizer), args.vocab_size, args.positions)
    s = labeled(args.task)   # the split of SEED_SPLIT for every arm and seed
    enc, trunc = ft.encode(finetune_config(args, None, 0), tok, s)
    print(f"{args.task}: truncated at {args.max_length} tokens: "
          + ", ".join(f"{k} {v['truncated_fraction']:.1%}" for k, v in trunc.items()), flush=True)
    inits = [None if i in ("random", "none") else i for i in args.init.split(",")]
    for seed in (int(x) for x in args.seeds.split(",")):
        for init in inits:
            row = finetune_one(args, init, seed, tok, s, enc)
            with open(out / "finetune.jsonl", "a") as f:
                f.write(jsonio.dumps(row) + "\n")


def report(args) -> dict:
    out = pathlib.Path(args.out)
    rows = [json.loads(line) for line in open(out / "finetune.jsonl")]
    if args.tag:
        rows = [r for r in rows if r.get("tag") == args.tag]
    rows = [r for r in rows if r.get("task", "reviews") == args.task]
    tok = get_tokenizer(pathlib.Path(args.tokenizer), args.vocab_size, args.positions)
    s = labeled(args.task)
    metric = ft.HEADLINE[args.task]   # the Δ column: accuracy (reviews), macro-F1 (news)
    y_test = s.splits["test"]["label"]
    ckpts = {}
    for pj in [out / "pretrain.json", *[pathlib.Path(p) for p in args.pretrain_json]]:
        if pj.exists():
            meta = json.loads(pj.read_text())
            for c in meta["checkpoints"]:
                ckpts[c["dir"]] = {**c, "corpus": meta["args"]["corpus"]}
    table = pretrain_value.aggregate(rows, ckpts, y_test, metrics=dict.fromkeys([metric, "accuracy"]))
    base = {}
    weighting = next((r["class_weights"] for r in rows if r.get("class_weights")), None)  # the baseline's too
    for ml in sorted({e["max_length"] for e in table}):  # same task, split and truncation as the models
        b = evaluate.baseline_at_cut(s, tok, ml, class_weight=weighting)
        base[str(ml)] = {k: v for k, v in b.items() if not k.endswith("_report")}
    pm = lambda d: f"{d['mean']:.4f}±{d['std']:.4f}"  # noqa: E731
    print(f"\n{'init':<46} {'lr':>7} {'ep':>3} {'tokens':>10} {'pt min':>6} {'MLM loss':>8} "
          f"{'val acc':>15} {'test acc':>15} {'test F1':>15} {DELTA[metric]:>46} {'ft min':>6}")
    for e in table:
        d = e.get(f"test_{metric}_diff_vs_random")
        ds = f"{d['mean']:+.4f} [{d['ci95'][0]:+.4f},{d['ci95'][1]:+.4f}]" if d else ""
        if d and "ci95_seeds" in d:  # seeds resampled too (stats.bootstrap_diff_seeds)
            ds += f" seeds [{d['ci95_seeds'][0]:+.4f},{d['ci95_seeds'][1]:+.4f}]"
        loss = f"{e['pretrain_eval_loss']:.3f}" if e["pretrain_eval_loss"] is not None else "-"
        parts = [x for x in pathlib.Path(e["init"]).parts if x not in ("checkpoints", "model")]
        name = "/".join(parts[-2:])  # run/step-N (of run/checkpoints/step-N/model): runs can share step numbers
        print(f"{name + ' ' + e['pooling'] + ' L' + str(e['max_length']):<46} "
              f"{e['lr']:>7g} {e['epochs']:>3g} {e['pretrain_tokens']:>10,} {e['pretrain_min']:>6.1f} {loss:>8} "
              f"{pm(e['validation_accuracy']):>15} {pm(e['test_accuracy']):>15} {pm(e['test_macro_f1']):>15} "
              f"{ds:>46} {e['finetune_min_mean']:>6.1f}")
    for ml, rep in base.items():
        print(f"TF-IDF char 1-3-gram + LR{' (class_weight=' + weighting + ')' if weighting else ''}, "
              f"text cut at {ml} tokens: val {rep['validation_accuracy']:.4f}  "
              f"test {rep['test_accuracy']:.4f}  test F1 {rep['test_macro_f1']:.4f}  (truncated: "
              + ", ".join(f"{k} {v:.1%}" for k, v in rep["truncated_fraction"].items()) + ")")
    stats = {"task": args.task, "headline_metric": f"test_{metric}", "table": table, "baseline": base,
             "n_rows": len(rows), "split_seed": SEED_SPLIT, "machine": args.machine, "class_weights": weighting,
             "tokenizer_on_validation": text.tokenizer_stats(tok, s.splits["validation"]["text"]),
             "n_test": len(y_test), "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    jsonio.write_json(out / "stats.json", stats)
    print(f"wrote {out / 'stats.json'}")
    return stats


def tapt(args) -> dict:
    """The ``tapt`` phase: a People's Daily model as the published one, continued on the training reviews with
    ``init``, both fine-tuned with ``--seeds``; returns (and writes ``<out>/tapt.json``) the paired difference."""
    import numpy as np

    from nbkit.evaluate import stats
    from nbkit.recipes.pretraining import PretrainConfig, run_pretraining

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok = get_tokenizer(pathlib.Path(args.tokenizer), args.vocab_size, args.positions)
    flags = {field: getattr(args, flag) for flag, field in PRETRAIN_FLAGS.items()}
    runs = {}
    for name, cfg, kw in (
            ("published", PretrainConfig.for_scale(args.scale, **{**flags, "max_steps": args.published_steps,
                                                                  "mix": MIXES["pd"]}), {"tokenizer": tok}),
            ("tapt", None, {})):
        if cfg is None:   # continue the published model on the training reviews: its tokenizer, its weights
            cfg = PretrainConfig.for_scale(args.scale, init=runs["published"]["model_dir"], mix=MIXES["reviews"],
                                           max_steps=args.tapt_steps, lr=args.tapt_lr, batch_size=args.mlm_batch,
                                           block_size=args.block, seed=args.pretrain_seed)
        t0 = time.perf_counter()
        m = run_pretraining(cfg, out / name, **kw)
        runs[name] = {"model_dir": m["model_dir"], "steps": m["steps"], "train_tokens": m["train_tokens"],
                      "lr": m["lr"], "eval_loss": m["eval_loss"], "untrained_eval_loss": m["untrained_eval_loss"],
                      "tokens_per_s": m["tokens_per_s"], "wall_s": time.perf_counter() - t0, "corpus": cfg.mix}
        print(f"{name}: {m['steps']} steps, {m['train_tokens']:,} tokens, held-out MLM loss "
              f"{m['untrained_eval_loss']:.3f} -> {m['eval_loss']:.3f}", flush=True)
    args.init, args.tag = f"{runs['published']['model_dir']},{runs['tapt']['model_dir']}", args.tag or "tapt"
    finetune(args)
    rows = [json.loads(line) for line in open(out / "finetune.jsonl")]
    rows = [r for r in rows if r.get("tag") == args.tag]
    y = labeled(args.task).splits["test"]["label"]
    by = {name: sorted((r for r in rows if r["init"] == runs[name]["model_dir"]), key=lambda r: r["seed"])
          for name in runs}
    seeds = sorted({r["seed"] for r in by["published"]} & {r["seed"] for r in by["tapt"]})
    pred = {name: [next(r["test_pred"] for r in by[name] if r["seed"] == s) for s in seeds] for name in runs}
    result = {"task": args.task, "seeds": seeds, "runs": runs, "machine": args.machine, "threads": args.threads}
    for m in ("accuracy", "macro_f1"):
        score = stats.accuracy if m == "accuracy" else stats.macro_f1
        d = stats.bootstrap_diff(y, pred["tapt"], pred["published"], metric=score)
        entry = {"mean": d["value"], "ci95": [d["low"], d["high"]]}
        if len(seeds) >= 2:
            ds = stats.bootstrap_diff_seeds(y, pred["tapt"], pred["published"], metric=score)
            entry.update(ci95_seeds=[ds["low"], ds["high"]], per_seed=ds["per_seed"])
        result[f"test_{m}_diff_tapt_vs_published"] = entry
        for name in runs:
            v = [score(y, p) for p in pred[name]]
            runs[name][f"test_{m}"] = {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                                       "values": v}
    base = evaluate.baseline_at_cut(labeled(args.task), tok, args.max_length)
    result["baseline"] = {k: v for k, v in base.items() if not k.endswith("_report")}
    result["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    jsonio.write_json(out / "tapt.json", result)
    d = result["test_accuracy_diff_tapt_vs_published"]
    print(f"test accuracy: published {runs['published']['test_accuracy']['mean']:.4f}, continued on the reviews "
          f"{runs['tapt']['test_accuracy']['mean']:.4f}: {100 * d['mean']:+.1f} points [{100 * d['ci95'][0]:+.1f}, "
          f"{100 * d['ci95'][1]:+.1f}] (test reviews resampled)"
          + (f", [{100 * d['ci95_seeds'][0]:+.1f}, {100 * d['ci95_seeds'][1]:+.1f}] (seeds too)" if "ci95_seeds" in d
             else "") + f"; TF-IDF at the same cut {result['baseline']['test_accuracy']:.4f}; wrote {out / 'tapt.json'}")
    return result


def build_parser(scale_name: str = "cpu") -> argparse.ArgumentParser:
    """The flags; every recipe flag's default is ``scale_name``'s config value (:func:`recipes`)."""
    pt, fc = scale_recipes(scale_name)
    quarter = max(1, pt.max_steps // 4)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("all", "pretrain", "finetune", "report", "tapt"))
    ap.add_argument("--scale", default=scale_name, help="whose recipes give the defaults (cpu: the recorded runs)")
    ap.add_argument("--out", default="runs/pretrain_value")
    ap.add_argument("--tokenizer", default="runs/pretrain_value_tokenizer", help="trained once, then reused")
    ap.add_argument("--vocab-size", type=int, default=TokenizerConfig.for_scale(scale_name).vocab_size)
    ap.add_argument("--positions", type=int, default=128, help="the tokenizer's model_max_length")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                    help="where pretraining and fine-tuning run (bf16 autocast on a bf16-capable GPU)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--model", default=fc.model, help="BERT preset (nbkit.models.bert.PRESETS), both recipes")
    # pretraining (nbkit.recipes.pretraining)
    ap.add_argument("--task", choices=("reviews", "news"), default="reviews",
                    help="fine-tuning task: reviews (2 classes) or news (3 classes, optional nbkit[news])")
    ap.add_argument("--corpus", choices=tuple(MIXES), default=None,
                    help="MLM text: People's Daily, a task's TRAINING texts, or PD + reviews; default: --task's")
    ap.add_argument("--review-repeat", type=int, default=1, help="weight of the reviews in 'mix'")
    ap.add_argument("--block", type=int, default=pt.block_size)
    ap.add_argument("--mlm-batch", type=int, default=pt.batch_size)
    ap.add_argument("--mlm-lr", type=float, default=pt.lr)
    ap.add_argument("--mlm-warmup", type=float, default=pt.warmup_ratio)
    ap.add_argument("--mlm-schedule", default=pt.scheduler)
    ap.add_argument("--mlm-prob", type=float, default=pt.mlm_probability)
    ap.add_argument("--save-steps", default=f"{quarter},{2 * quarter},{pt.max_steps}",
                    help="checkpoints to fine-tune from; the LR schedule ends at the last")
    ap.add_argument("--pretrain-seed", type=int, default=pt.seed)
    ap.add_argument("--published-steps", type=int, default=pt.max_steps,
                    help="tapt: steps of the People's Daily model that stands in for a published one")
    ap.add_argument("--tapt-steps", type=int, default=max(1, pt.max_steps // 4),
                    help="tapt: steps continuing it on the training reviews (init)")
    ap.add_argument("--tapt-lr", type=float, default=pt.lr / 2,
                    help="tapt: lr of the continued run (init's 5e-5 is for BERT-base; a narrow model wants more)")
    # fine-tuning (nbkit.recipes.finetuning)
    ap.add_argument("--init", default="random", help="comma list of checkpoint dirs and/or 'random'")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--pooling", choices=models.POOLINGS, default=fc.pooling)
    ap.add_argument("--max-length", type=int, default=fc.max_length)
    ap.add_argument("--ft-batch", type=int, default=fc.batch_size)
    ap.add_argument("--ft-epochs", type=float, default=fc.epochs)
    ap.add_argument("--ft-lr", type=float, default=fc.lr, help="pretrained arms")
    ap.add_argument("--ft-lr-random", type=float, default=None, help="random-init arm (default: --ft-lr)")
    ap.add_argument("--ft-warmup", type=float, default=fc.warmup_ratio)
    ap.add_argument("--ft-class-weights", choices=("balanced",), default=fc.class_weights,
                    help="weight the loss by inverse class frequency (TrainConfig.class_weights); give the "
                         "runs a --tag so that report keeps them apart")
    ap.add_argument("--machine", default=None, help="report: where the run ran, kept in stats.json for the README")
    ap.add_argument("--pretrain-json", nargs="*", default=[], help="report: more pretrain.json files")
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    """Two passes: ``--scale`` first (it sets the defaults), then every flag."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--scale", default="cpu")
    scale_name = pre.parse_known_args(argv)[0].scale
    args = build_parser(scale_name).parse_args(argv)
    args.corpus = args.corpus or args.task
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.phase in ("pretrain", "all"):
        pretrain(args)
    if args.phase == "all":
        meta = json.loads((pathlib.Path(args.out) / "pretrain.json").read_text())
        args.init = ",".join(["random"] + [c["dir"] for c in meta["checkpoints"]])
    if args.phase in ("finetune", "all"):
        finetune(args)
    if args.phase in ("report", "all"):
        report(args)
    if args.phase == "tapt":
        tapt(args)


if __name__ == "__main__":
    main()
