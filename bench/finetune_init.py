"""Benchmark: does MLM pretraining help? Fine-tune from notebook 02's checkpoint vs from random weights.

Same tokenizer, data split, encoding, TrainConfig (the scale's fine-tuning
settings from ``pipeline.finetune_config``) and steps on both sides; only the
initial encoder weights differ. Prints validation accuracy and final train loss
of each, and their difference. Needs notebooks 01 and 02 to have run at the
scale (``runs/<scale>/tokenizer`` and ``runs/<scale>/mlm/model``).

    NBKIT_RUNS_DIR=runs python bench/finetune_init.py [--scale cpu] [--steps N] [--lr X]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from nbkit.data import corpora as data
from nbkit.models import bert as modeling
from nbkit.pipeline import steps as pipeline  # noqa: E402
from nbkit.pipeline.scale import get_scale  # noqa: E402
from nbkit.text import mlm
from nbkit.train import Loop  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--steps", type=int, default=None, help="default: the scale's cls_epochs over the data")
    ap.add_argument("--lr", type=float, default=None, help="default: the scale's cls_lr")
    args = ap.parse_args()
    scale = get_scale(args.scale)
    checkpoint = pipeline.pretrained_model_dir(scale)
    if checkpoint is None:
        sys.exit(f"no pretrained model for scale {scale.name!r}: run notebooks 01 and 02 first "
                 f"(nbkit run-notebooks --scale {scale.name} --only 01 02)")
    tok = pipeline.load_tokenizer(scale)
    sentiment = data.load_sentiment(seed=scale.seed, max_train=scale.sentiment_max_train)
    enc = {k: mlm.encode_classification(sentiment.splits[k], tok, scale.cls_max_length)[0]
           for k in ("train", "validation")}
    print(f"scale {scale.name}: {len(enc['train']):,} training reviews, {len(enc['validation']):,} validation")
    results = {}
    for name, source in (("pretrained", checkpoint), ("random init", None)):
        model, how = modeling.build_classifier(source, num_labels=len(sentiment.label2id),
                                               id2label=sentiment.id2label, tokenizer=tok, preset=scale.model,
                                               seed=scale.seed, pooling=scale.cls_pooling)
        with tempfile.TemporaryDirectory() as out:
            overrides = {k: v for k, v in (("max_steps", args.steps), ("lr", args.lr)) if v is not None}
            cfg = pipeline.finetune_config(scale, pathlib.Path(out), n_train=len(enc["train"]), progress=False,
                                           checkpoint_every=None, eval_every=None, **overrides)
            t0 = time.perf_counter()
            res = Loop(model, cfg, enc["train"], enc["validation"],
                       collate_fn=mlm.classification_collator(tok)).fit()
        results[name] = res.metrics
        print(f"{name:>12}: validation accuracy {res.metrics['eval_accuracy']:.3f}  "
              f"train loss {res.metrics['train_loss']:.3f}  {cfg.max_steps} steps at lr {cfg.lr:g}  "
              f"{time.perf_counter() - t0:.0f} s   ({how})")
    gain = results["pretrained"]["eval_accuracy"] - results["random init"]["eval_accuracy"]
    print(f"pretrained - random init: {gain:+.3f} validation accuracy")


if __name__ == "__main__":
    main()
