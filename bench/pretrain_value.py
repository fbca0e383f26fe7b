"""Benchmark: what is nbkit's own MLM pretraining worth for sentiment fine-tuning?

The same fine-tuning recipe runs from random weights and from checkpoints taken after increasing
amounts of MLM pretraining (one pretraining run, checkpoints at ``--save-steps``), with several seeds
each. It prints validation/test accuracy and macro-F1 (mean +- std over seeds), the difference of the
task's headline metric to random init with a paired bootstrap 95 % interval (test examples resampled,
seeds averaged), pretraining tokens and wall time, and the TF-IDF baseline on the same task, split and
truncation; everything goes to ``<out>/stats.json`` (strict JSON). The recorded run of 2026-11-30 is
``notebooks/data/pretrain_value.json`` (rendered by ``nbkit.pipeline.pretrain_value`` in notebooks 02/03 and the README).

Everything goes through nbkit: ``text.train_wordpiece``, ``text.make_blocks`` + ``MLMCollator``,
``models.build_mlm_model`` / ``build_classifier``, ``train.Loop``, ``pipeline.predict``,
``pipeline.classification_report``, ``pipeline.tasks`` (task data, TF-IDF at the model's cut).

Tasks (``--task``): ``reviews`` (default, 2 balanced classes; headline test accuracy) or ``news``
(optional ``nbkit[news]``: 3 classes positive/neutral/negative, about 10/50/40 %, long documents;
headline test macro-F1, accuracy beside it). Data: the tokenizer is trained once (People's Daily
training lines + training reviews) and reused by every arm and task. Pretraining text (``--corpus``,
default the task's own) is People's Daily (gold word boundaries), a task's TRAINING-split texts
(``reviews``/``news``: domain-adaptive pretraining, Gururangan et al. 2020; jieba words for whole-word
masking), or PD + reviews (``mix``). Validation and test texts are never pretrained on.

    python bench/pretrain_value.py all --out runs/pretrain_value            # the benchmark
    python bench/pretrain_value.py pretrain --out DIR [knobs]               # checkpoints only
    python bench/pretrain_value.py finetune --out DIR --init DIR/step_000500 --seeds 0,1,2
    python bench/pretrain_value.py report --out DIR                         # table + stats.json
    python bench/pretrain_value.py all --task news --max-length 128 --out runs/pv_news   # the second task

Defaults are the recipe in ``docs/pretraining.md`` (BERT 128x4, DAPT on training reviews, 15 % jieba whole-word
masking, lr 1e-3, checkpoints at 2.0 / 4.1 / 8.2 M tokens; fine-tune mean pooling, lr 5e-4, max_length 64).
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

from nbkit import data, jsonio, models, pipeline, text  # noqa: E402
from nbkit.models.bert import quiet_transformers  # noqa: E402
from nbkit.pipeline import pretrain_value, tasks  # noqa: E402
from nbkit.train import Loop, TrainConfig  # noqa: E402

SEED_SPLIT = 0          # the task's split (load_sentiment's seed), the same for every arm
DELTA = {"accuracy": "Δtest vs random [95% CI]", "macro_f1": "Δtest F1 vs random [95% CI]"}


# ----- data ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def labeled(task: str):
    """The task's splits (``tasks.load_task``): ``reviews`` (default) or ``news`` (optional package)."""
    return tasks.load_task(task, seed=SEED_SPLIT)


def get_tokenizer(path: pathlib.Path, vocab_size: int, max_positions: int):
    """Train the WordPiece tokenizer once (PD training lines + training reviews) and reuse it."""
    from transformers import AutoTokenizer

    if (path / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(str(path))
    texts, _ = pipeline.tokenizer_texts(pipeline.get_scale("cpu"))   # notebook 01's: split seed 0, all lines
    return text.train_wordpiece(texts, vocab_size=vocab_size, out_dir=path, model_max_length=max_positions)


def mlm_blocks(tok, corpus: str, block: int, review_repeat: int, review_words: bool):
    import datasets

    parts = {"train": [], "validation": []}
    if corpus in ("pd", "mix"):
        pd = data.split_corpus(data.load_peoples_daily(), eval_fraction=0.05, seed=0)
        for k in parts:
            parts[k].append(text.make_blocks(pd[k], tok, block, words_column="words"))
    if corpus in ("reviews", "news", "mix"):  # a task's TRAINING texts only (never validation/test)
        rv = tasks.training_mlm_corpus(labeled("news" if corpus == "news" else "reviews"), review_words)
        col = "words" if review_words else None
        for k in parts:
            b = text.make_blocks(rv[k], tok, block, words_column=col)
            parts[k].extend([b] * (review_repeat if k == "train" else 1))
    if corpus == "mix" and not review_words:  # columns must agree: drop word_ids (plain token masking)
        parts = {k: [p.remove_columns([c for c in p.column_names if c != "input_ids"]) for p in v]
                 for k, v in parts.items()}
    return {k: datasets.concatenate_datasets(v) for k, v in parts.items()}


def model_overrides(args) -> dict:
    return dict(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                intermediate_size=4 * args.hidden, max_position_embeddings=args.positions)


def device_of(args) -> str:
    """``--device``: ``cpu`` (the recorded runs), ``cuda``, or ``auto`` (CUDA when available)."""
    if args.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return args.device


# ----- phases -------------------------------------------------------------------------------
def pretrain(args) -> None:
    out = pathlib.Path(args.out)
    tok = get_tokenizer(pathlib.Path(args.tokenizer), args.vocab_size, args.positions)
    blocks = mlm_blocks(tok, args.corpus, args.block, args.review_repeat, args.review_words)
    save_steps = sorted(int(s) for s in args.save_steps.split(","))
    max_steps = save_steps[-1]
    torch.manual_seed(args.pretrain_seed)
    model = models.build_mlm_model("mini", tok, args.block, **model_overrides(args))
    collator = text.MLMCollator(tok, mlm_probability=args.mlm_prob, seed=args.pretrain_seed)
    cfg = TrainConfig(max_steps=max_steps, batch_size=args.mlm_batch, lr=args.mlm_lr, warmup_ratio=args.mlm_warmup,
                      scheduler=args.mlm_schedule, eval_every=None, seed=args.pretrain_seed, progress=False,
                      log_every=max(1, max_steps // 20), output_dir=None)
    log = []

    class Saver:
        def __init__(self):
            self.t0 = None

        def on_train_begin(self, loop):
            self.t0 = time.perf_counter()

        def on_step_end(self, loop):
            step = loop.state.step
            if step in save_steps:
                wall = time.perf_counter() - self.t0
                ev = loop.evaluate(max_batches=20)
                d = out / f"step_{step:06d}"
                with quiet_transformers():
                    loop.model.save_pretrained(d)
                tok.save_pretrained(d)
                entry = {"step": step, "train_tokens": loop.state.train_tokens, "wall_s": wall,
                         "eval_loss": ev["eval_loss"], "dir": str(d)}
                log.append(entry)
                jsonio.write_json(out / "pretrain.json", {"args": vars(args), "checkpoints": log})
                print(f"pretrain step {step}: {entry['train_tokens']:,} tokens, {wall/60:.1f} min, "
                      f"held-out MLM loss {ev['eval_loss']:.3f}", flush=True)
                self.t0 += time.perf_counter() - self.t0 - wall  # keep the save/eval out of the wall time

        def on_log(self, loop, logs):
            if logs["step"] % max(1, max_steps // 10) == 0:
                print(f"  step {logs['step']} loss {logs['loss']:.3f} lr {logs['lr']:.2e} "
                      f"{logs.get('tokens_per_s') or 0:.0f} tok/s", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    print(f"MLM blocks: {len(blocks['train']):,} train x {args.block} tokens ({args.corpus}); "
          f"{models.count_parameters(model):,} parameters", flush=True)
    loop = Loop(model, cfg, blocks["train"], blocks["validation"], collate_fn=collator, callbacks=[Saver()],
                device=device_of(args))
    untrained = loop.evaluate(max_batches=20)
    print(f"untrained held-out MLM loss {untrained['eval_loss']:.3f}", flush=True)
    loop.fit()


def encode_splits(tok, max_length: int, task: str):
    s = labeled(task)
    enc, trunc = {}, {}
    for k in ("train", "validation", "test"):
        enc[k], rep = text.encode_classification(s.splits[k], tok, max_length)
        trunc[k] = rep["truncated_fraction"]
    print(f"{task}: truncated at {max_length} tokens: " + ", ".join(f"{k} {v:.1%}" for k, v in trunc.items()), flush=True)
    return s, enc


def finetune_one(args, init: str | None, seed: int, tok, s, enc) -> dict:
    """Fine-tune once (``init`` None = random weights) and score validation and test."""
    import transformers

    lr = args.ft_lr_random if (init is None and args.ft_lr_random) else args.ft_lr
    transformers.set_seed(seed)  # seeded head (and encoder, for random init)
    model, how = models.build_classifier(init, num_labels=s.num_labels, id2label=s.id2label, tokenizer=tok,
                                           preset="mini", pooling=args.pooling,
                                           **(model_overrides(args) if init is None else {}))
    steps = pipeline.steps_for_epochs(len(enc["train"]), args.ft_batch, args.ft_epochs)
    cfg = TrainConfig(max_steps=steps, batch_size=args.ft_batch, lr=lr, warmup_ratio=args.ft_warmup,
                      scheduler="linear", seed=seed, progress=False, log_every=max(1, steps // 10),
                      group_by_length=True, output_dir=None, class_weights=args.ft_class_weights)
    t0 = time.perf_counter()
    res = Loop(model, cfg, enc["train"], None, collate_fn=text.classification_collator(tok),
               device=device_of(args)).fit()
    ft_s = time.perf_counter() - t0
    row = {"init": init or "random", "seed": seed, "lr": lr, "steps": steps, "epochs": args.ft_epochs,
           "pooling": args.pooling, "max_length": args.max_length, "finetune_s": ft_s,
           "train_loss": res.metrics["train_loss"], "how": how, "tag": args.tag, "task": args.task,
           "class_weights": args.ft_class_weights}
    for split in ("validation", "test"):
        texts, labels = s.splits[split]["text"], s.splits[split]["label"]
        pred = pipeline.predict(model, tok, texts, max_length=args.max_length, batch_size=128)["label"]
        rep = pipeline.classification_report(labels, pred, s.id2label)
        row[f"{split}_accuracy"], row[f"{split}_macro_f1"] = rep["accuracy"], rep["macro_f1"]
        if split == "test":
            row["test_pred"] = [int(p) for p in pred]
    print(f"{row['init']:>40} seed {seed} lr {lr:g}: val {row['validation_accuracy']:.4f} "
          f"test {row['test_accuracy']:.4f} F1 {row['test_macro_f1']:.4f}  {ft_s:.0f} s", flush=True)
    return row


def finetune(args) -> None:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok = get_tokenizer(pathlib.Path(args.tokenizer), args.vocab_size, args.positions)
    s, enc = encode_splits(tok, args.max_length, args.task)
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
    metric = tasks.HEADLINE[args.task]   # the Δ column: accuracy (reviews), macro-F1 (news)
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
        b = tasks.baseline_at_cut(s, tok, ml, class_weight=weighting)
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
        name = "/".join(pathlib.Path(e["init"]).parts[-2:])  # run/step_N: runs can share step numbers
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("all", "pretrain", "finetune", "report"))
    ap.add_argument("--out", default="runs/pretrain_value")
    ap.add_argument("--tokenizer", default="runs/pretrain_value_tokenizer", help="trained once, then reused")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                    help="where pretraining and fine-tuning run (bf16 autocast on a bf16-capable GPU)")
    ap.add_argument("--tag", default="")
    # model (BERT encoder; intermediate = 4 x hidden)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--positions", type=int, default=128)
    # pretraining
    ap.add_argument("--task", choices=tasks.TASKS, default="reviews",
                    help="fine-tuning task: reviews (2 classes) or news (3 classes, optional nbkit[news])")
    ap.add_argument("--corpus", choices=("pd", "reviews", "news", "mix"), default=None,
                    help="MLM text: People's Daily, a task's TRAINING texts, or PD + reviews; default: --task's")
    ap.add_argument("--review-words", action=argparse.BooleanOptionalAction, default=True,
                    help="jieba word boundaries for whole-word masking of task texts")
    ap.add_argument("--review-repeat", type=int, default=1, help="copies of the review blocks in 'mix'")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--mlm-batch", type=int, default=64)
    ap.add_argument("--mlm-lr", type=float, default=1e-3)
    ap.add_argument("--mlm-warmup", type=float, default=0.06)
    ap.add_argument("--mlm-schedule", default="linear")
    ap.add_argument("--mlm-prob", type=float, default=0.15)
    ap.add_argument("--save-steps", default="500,1000,2000",
                    help="checkpoints to fine-tune from; the LR schedule ends at the last")
    ap.add_argument("--pretrain-seed", type=int, default=0)
    # fine-tuning
    ap.add_argument("--init", default="random", help="comma list of checkpoint dirs and/or 'random'")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--pooling", choices=models.POOLINGS, default="mean")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--ft-batch", type=int, default=32)
    ap.add_argument("--ft-epochs", type=float, default=1.0)
    ap.add_argument("--ft-lr", type=float, default=5e-4, help="pretrained arms")
    ap.add_argument("--ft-lr-random", type=float, default=None, help="random-init arm (default: --ft-lr)")
    ap.add_argument("--ft-warmup", type=float, default=0.1)
    ap.add_argument("--ft-class-weights", choices=("balanced",), default=None,
                    help="weight the loss by inverse class frequency (TrainConfig.class_weights); give the "
                         "runs a --tag so that report keeps them apart")
    ap.add_argument("--machine", default=None, help="report: where the run ran, kept in stats.json for the README")
    ap.add_argument("--pretrain-json", nargs="*", default=[], help="report: more pretrain.json files")
    args = ap.parse_args()
    args.corpus = args.corpus or args.task
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


if __name__ == "__main__":
    main()
