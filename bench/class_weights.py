"""Class-weighted fine-tuning on a 20:1 imbalanced file: minority recall and macro-F1, with and without.

Usage: ``python bench/class_weights.py [--steps 60 --lr 2e-3]`` (CPU, about a minute). Data:
``tests/fixtures/imbalanced_20_to_1.jsonl`` (400 ``好评``, 20 ``差评``), split 50/20/30 %
(stratified, seed 0); a WordPiece tokenizer on the training texts; BERT-tiny from scratch
(seed 0); the same steps with ``class_weights=None`` and ``"balanced"``. The fine-tuning recipe
(:mod:`nbkit.recipes.finetuning`) with overrides: the settings of the README's measurement (pooling ``cls``,
warm-up 0.06, no length grouping), so its numbers stay comparable.
"""
from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

from nbkit import data, evaluate, text
from nbkit.recipes import finetuning as ft

FILE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "imbalanced_20_to_1.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()
    labeled = data.load_labeled_files(str(FILE), val_fraction=0.2, test_fraction=0.3, seed=0)
    train, test = labeled.splits["train"], labeled.splits["test"]
    minority = min(labeled.report["class_counts"]["train"], key=labeled.report["class_counts"]["train"].get)
    with tempfile.TemporaryDirectory() as tmp:
        tok = text.train_wordpiece(train["text"], vocab_size=500, out_dir=f"{tmp}/tok", model_max_length=128)
        print(f"train {len(train)} ({labeled.report['class_counts']['train']}), test {len(test)}; "
              f"{args.steps} steps, batch 16, lr {args.lr}")
        for weights in (None, "balanced"):
            cfg = ft.FinetuneConfig.for_scale("smoke", model="tiny", max_length=32, batch_size=16, max_steps=args.steps,
                                              lr=args.lr, class_weights=weights, pooling="cls", warmup_ratio=0.06,
                                              group_by_length=False, seed=0, eval_every=0, log_every=args.steps,
                                              init="random", progress=False)
            enc, _ = ft.encode(cfg, tok, labeled, splits=("train",))
            model, _ = ft.model(cfg, tok, labeled)
            ft.train(cfg, model, tok, enc, device="cpu")
            pred = evaluate.predict(model, tok, test["text"], max_length=32)["label"]
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                rep = evaluate.classification_report(test["label"], pred, labeled.id2label)
            r = rep["per_class"][minority]
            print(f"class_weights={weights!s:9}  accuracy {rep['accuracy']:.3f}  macro-F1 {rep['macro_f1']:.3f}  "
                  f"{minority} recall {r['recall']:.3f} (support {r['support']})")


if __name__ == "__main__":
    main()
