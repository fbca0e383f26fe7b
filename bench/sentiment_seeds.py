"""Benchmark: review sentiment at a scale, fine-tuned BERT vs TF-IDF and a character BiLSTM, over seeds.

Each seed runs notebook 03's recipe end to end (:func:`nbkit.recipes.finetuning.run_finetuning`, task ``reviews``:
its own split, head and data order; the encoder is the recipe's default, notebook 02's model at this scale when
saved, else random weights, and the record says which), which also scores the TF-IDF character 1-3-gram logistic
regression on the full texts and on the texts cut where BERT's tokenizer cuts them. Beside them the plain neural
reference (``bench/bilstm.py``'s classifier: the same training reviews, each cut at ``max_length - 2`` characters,
BERT's cut for Chinese text, 2 epochs at batch 32) is scored on the same test reviews. Accuracy (the task's
headline) and macro-F1 per arm, a 95 % bootstrap interval of each accuracy over test reviews, and over seeds mean
and standard deviation. ``--lora`` adds an arm ``bert_lora``: the same recipe with ``lora=True`` (LoRA adapters on
the attention projections and the head, the encoder frozen: ``FinetuneConfig.lora_*``) from the same encoder, on
the same split with the same seed and steps, beside full fine-tuning; it records the trainable parameters and
the rate it trained at.

    python bench/sentiment_seeds.py --scale cpu --seeds 0 1 2 --machine "2-core CPU"
    python bench/sentiment_seeds.py --scale cpu --seeds 0 --lora --out bench/results/sentiment_lora_cpu_<date>.json

At ``cpu`` run notebooks 01 and 02 at ``cpu`` first (``scripts/run_notebooks.sh --only 01 02``). A seed takes
~5-8 min on 2 cores (BERT's 869 steps, the BiLSTM ~1-2 min, TF-IDF seconds).
Writes ``--out`` (strict JSON, default ``bench/results/sentiment_<scale>_<date>.json``);
``scripts/sentiment_table.py`` renders it into docs/finetuning.md and the READMEs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ARMS = ("bert", "tfidf", "tfidf_cut", "bilstm")
LORA_ARM = "bert_lora"


def accuracy_interval(gold, pred, n_boot: int = 1000, seed: int = 0) -> list[float]:
    """Percentile bootstrap 95 % interval of the accuracy over test examples (``nbkit.evaluate.stats``' resampling)."""
    import numpy as np

    from nbkit.evaluate.stats import percentile_interval, resample_indices

    hits = (np.asarray(gold) == np.asarray(pred)).astype(float)
    return list(percentile_interval([hits[i].mean() for i in resample_indices(len(hits), n_boot, seed)]))


def summarize(per_seed: list[dict]) -> dict:
    """Mean and standard deviation over seeds of each arm's accuracy and macro-F1 (std None with one seed); the
    LoRA arm where the seeds have it, with ``diff_lora_accuracy``: LoRA minus full fine-tuning, paired by seed."""
    def stats(values):
        return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
                "n": len(values)}

    lora = all(LORA_ARM in r for r in per_seed)
    out = {f"{arm}_{m}": stats([r[arm][m] for r in per_seed])
           for arm in ARMS + ((LORA_ARM,) if lora else ()) for m in ("accuracy", "macro_f1")}
    if lora:
        out["diff_lora_accuracy"] = stats([r[LORA_ARM]["accuracy"] - r["bert"]["accuracy"] for r in per_seed])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--init", default=None, help="the encoder (default: the recipe's: notebook 02's, else random)")
    ap.add_argument("--bilstm-epochs", type=float, default=2.0)
    ap.add_argument("--lora", action="store_true",
                    help="also fine-tune with LoRA (arm bert_lora: lora=True, the recipe's lora_* settings)")
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2-core CPU shared with other jobs"')
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    from bilstm import classify

    from nbkit.evaluate.metrics import classification_report
    from nbkit.recipes import finetuning as ft

    per_seed, configs = [], []
    for seed in a.seeds:
        cfg = ft.FinetuneConfig.for_scale(a.scale, seed=seed, init=a.init, progress=False, report_to="none")
        t0 = time.perf_counter()
        labeled = ft.data(cfg)
        m = ft.run_finetuning(cfg, labeled=labeled)
        bert_s = time.perf_counter() - t0
        s = labeled.splits
        gold = list(s["test"]["label"])
        t1 = time.perf_counter()
        pred, info = classify(list(s["train"]["text"]), list(s["train"]["label"]), list(s["test"]["text"]),
                              labeled.num_labels, max_chars=cfg.max_length - 2, epochs=a.bilstm_epochs, seed=seed)
        lstm = classification_report(gold, pred, labeled.id2label)
        row = {"seed": seed, "n_train": len(s["train"]), "n_test": len(gold), "init": m["init"],
               "truncated_fraction": m["truncated_fraction"].get("test"),
               "bert": {"accuracy": m["test_accuracy"], "macro_f1": m["test_macro_f1"], "s": bert_s,
                        "steps": m["train"]["steps"], "interval": accuracy_interval(gold, m["test_pred"], seed=seed)},
               "tfidf": {"accuracy": m["baseline_accuracy"], "macro_f1": m["baseline_macro_f1"]},
               "tfidf_cut": {"accuracy": m["baseline_cut_accuracy"], "macro_f1": m["baseline_cut_macro_f1"]},
               "bilstm": {"accuracy": lstm["accuracy"], "macro_f1": lstm["macro_f1"], "s": time.perf_counter() - t1,
                          "steps": info["steps"], "max_chars": cfg.max_length - 2,
                          "interval": accuracy_interval(gold, pred, seed=seed)}}
        if a.lora:
            t2 = time.perf_counter()
            lm = ft.run_finetuning(cfg.replace(lora=True), labeled=labeled)
            row[LORA_ARM] = {"accuracy": lm["test_accuracy"], "macro_f1": lm["test_macro_f1"],
                             "s": time.perf_counter() - t2, "steps": lm["train"]["steps"],
                             "tokens_per_s": lm["train"].get("tokens_per_s"), "lora": lm["lora"],
                             "trainable_parameters": lm["trainable_parameters"],
                             "interval": accuracy_interval(gold, lm["test_pred"], seed=seed)}
            row["bert"]["tokens_per_s"] = m["train"].get("tokens_per_s")
            print(f"seed {seed}: LoRA BERT {lm['test_accuracy']:.3f} ({lm['trainable_parameters']['share']:.2%} "
                  f"of the weights trained, lr {lm['lora']['lr']:g})", flush=True)
        per_seed.append(row)
        configs.append(m["config"])
        print(f"seed {seed}: BERT {row['bert']['accuracy']:.3f}, TF-IDF {row['tfidf']['accuracy']:.3f} (same cut "
              f"{row['tfidf_cut']['accuracy']:.3f}), BiLSTM {row['bilstm']['accuracy']:.3f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        write(a, per_seed, configs)       # after every seed: a stopped run keeps the seeds it finished
    return 0


def write(a, per_seed: list[dict], configs: list[dict]) -> Path:
    """The record of the seeds done so far, written as bench/ner_seeds.py writes its own."""
    import ner_seeds

    return ner_seeds.write(a, per_seed, configs, benchmark="sentiment_seeds",
                           stem="sentiment_lora" if a.lora else "sentiment", summary=summarize)


if __name__ == "__main__":
    sys.exit(main())
