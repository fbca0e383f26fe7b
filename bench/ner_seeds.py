"""Benchmark: named entities on People's Daily 1998, fine-tuned BERT vs the CRF baseline and a character BiLSTM,
over seeds.

Each seed runs the fine-tuning recipe's task ``ner`` end to end (:func:`nbkit.recipes.finetuning.run_finetuning`:
its own split, subsample, head and data order), which scores BERT and the CRF (trained on the same training
split) on the same test sentences by entity-level micro-F1 with a bootstrap 95 % interval over sentences. Beside
them the plain neural reference (``bench/bilstm.py``'s tagger: the same training sentences, 6 epochs at batch 32)
is scored on the same sentences. The record keeps per seed the three F1s, their intervals, the difference BERT - CRF with a paired bootstrap interval
(same sentences) and per-type F1, and over seeds the mean and standard deviation of each. No mid-run
validation (``eval_every=0``: time; nothing is chosen on it). The encoder is the recipe's default: notebook
02's model at this scale when saved in the runs folder, else random weights of the scale's preset (the record
says which).

    python bench/ner_seeds.py --scale cpu --seeds 0 1 2 --machine "Linux x86_64, 2 CPUs, no GPU"
    python bench/ner_seeds.py --scale cpu --seeds 0 --max-train 1500 --epochs 3         # a quick look

At ``cpu`` run notebooks 01 and 02 at ``cpu`` first (``scripts/run_notebooks.sh --only 01 02``, ~8 min), so the
encoder is notebook 02's (from random weights the row scores about the same: docs/ner.md, the diagnosis). A seed
takes ~4-5 min on a 2-core machine (BERT 1.5-3 min, the CRF ~25 s, the BiLSTM ~1.5 min).
    python bench/ner_seeds.py --scale gpu --seeds 0 1 2                            # the gpu arm, on a GPU

``--lora`` adds the recipe with ``lora=True`` (LoRA adapters on the attention projections, the head trained, the
encoder frozen: ``FinetuneConfig.lora_*``) from the same encoder on the same split, recorded as ``lora_f1``
beside full fine-tuning (``bench/results/ner_lora_<scale>_<date>.json``).

Writes ``--out`` (strict JSON, default ``bench/results/ner_<scale>_<date>.json``); ``scripts/ner_table.py``
renders it into the READMEs.
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


def summarize(per_seed: list[dict]) -> dict:
    """Mean and standard deviation over seeds of BERT's and the CRF's entity F1, and of their difference
    (paired by seed: same split, same test sentences); std is None with one seed."""
    def stats(values):
        return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
                "n": len(values)}

    out = {"bert_f1": stats([r["bert_f1"] for r in per_seed]), "crf_f1": stats([r["crf_f1"] for r in per_seed]),
           "diff_f1": stats([r["bert_f1"] - r["crf_f1"] for r in per_seed])}
    if all("bilstm_f1" in r for r in per_seed):
        out["bilstm_f1"] = stats([r["bilstm_f1"] for r in per_seed])
        out["diff_bilstm_f1"] = stats([r["bert_f1"] - r["bilstm_f1"] for r in per_seed])
    if all("lora_f1" in r for r in per_seed):
        out["lora_f1"] = stats([r["lora_f1"] for r in per_seed])
        out["diff_lora_f1"] = stats([r["lora_f1"] - r["bert_f1"] for r in per_seed])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--max-train", default=None, type=lambda v: v if v == "all" else int(v), help="training sentences (default: the scale's; all: every one)")
    ap.add_argument("--epochs", type=float, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--corpus-lines", type=int, default=None,
                    help="People's Daily lines read (default: the scale's; fewer: a smaller test split, faster)")
    ap.add_argument("--init", default=None, help="the encoder (default: the recipe's: notebook 02's, else random)")
    ap.add_argument("--no-bilstm", action="store_true", help="skip the BiLSTM reference")
    ap.add_argument("--lora", action="store_true", help="also fine-tune with LoRA (lora=True, the recipe's lora_*)")
    ap.add_argument("--machine", default=None, help='recorded as the machine, e.g. "2-core CPU shared with other jobs"')
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    from nbkit.recipes import finetuning as ft

    per_seed, configs = [], []
    for seed in a.seeds:
        cfg = ft.FinetuneConfig.for_scale(a.scale, task="ner", seed=seed, max_train=a.max_train, epochs=a.epochs,
                                          corpus_lines=a.corpus_lines, batch_size=a.batch_size, lr=a.lr, init=a.init,
                                          eval_every=0, progress=False, report_to="none")
        t0 = time.perf_counter()
        labeled = ft.data(cfg)
        m = ft.run_finetuning(cfg, labeled=labeled)
        row = {"seed": seed, "bert_f1": m["test_entity_f1"], "bert_f1_interval": m["test_entity_f1_interval"],
               "crf_f1": m["baseline_entity_f1"], "crf_f1_interval": m["baseline_entity_f1_interval"],
               "diff_f1_interval": [m["diff_entity_f1"]["low"], m["diff_entity_f1"]["high"]],
               "bert_per_type": {t: v["f1"] for t, v in (m["per_type"] or {}).items()},
               "crf_per_type": {t: v["f1"] for t, v in (m["baseline_per_type"] or {}).items()},
               "n_train": m.get("n_train"), "n_test": m.get("n_test"), "init": m["init"], "bert_errors": m["n_errors"],
               "steps": m["train"]["steps"], "finetune_s": m["train"].get("finetune_s"),
               "wall_s": time.perf_counter() - t0, "windows": m["windows"]}
        if not a.no_bilstm:
            row.update(bilstm_row(labeled, cfg))
        if a.lora:
            t2 = time.perf_counter()
            lm = ft.run_finetuning(cfg.replace(lora=True), labeled=labeled)
            row.update(lora_f1=lm["test_entity_f1"], lora_f1_interval=lm["test_entity_f1_interval"],
                       lora_s=time.perf_counter() - t2, lora=lm["lora"],
                       lora_trainable_parameters=lm["trainable_parameters"])
            print(f"seed {seed}: LoRA BERT entity F1 {lm['test_entity_f1']:.3f} "
                  f"({lm['trainable_parameters']['share']:.2%} of the weights trained, lr {lm['lora']['lr']:g})",
                  flush=True)
        per_seed.append(row)
        configs.append(m["config"])
        print(f"seed {seed}: BERT entity F1 {row['bert_f1']:.3f} {row['bert_f1_interval']}, CRF {row['crf_f1']:.3f} "
              f"{row['crf_f1_interval']}, BiLSTM {row.get('bilstm_f1', float('nan')):.3f} ({row['wall_s']:.0f} s)",
              flush=True)
        write(a, per_seed, configs, stem="ner_lora" if a.lora else "ner")   # a stopped run keeps finished seeds
    return 0


def bilstm_row(labeled, cfg) -> dict:
    """The BiLSTM tagger (``bench/bilstm.py``) trained on the seed's training sentences and scored on its test
    sentences: ``bilstm_f1``, ``bilstm_f1_interval`` (bootstrap over sentences, ``cfg.n_boot``), per type, seconds."""
    from bilstm import tag

    from nbkit.evaluate import ner

    t0 = time.perf_counter()
    test = labeled.splits["test"]
    gold = [list(it["tags"]) for it in test]
    pred, info = tag(labeled.splits["train"], test, list(labeled.labels), seed=cfg.seed)
    scores = ner.entity_scores(gold, pred)
    return {"bilstm_f1": scores["f1"], "bilstm_f1_interval": list(ner.entity_f1_interval(gold, pred, n_boot=cfg.n_boot,
                                                                                           seed=cfg.seed)),
            "bilstm_per_type": {t: v["f1"] for t, v in (scores.get("per_type") or {}).items()},
            "bilstm_steps": info["steps"], "bilstm_s": time.perf_counter() - t0}


def write(a, per_seed: list[dict], configs: list[dict], benchmark: str = "ner_seeds", stem: str = "ner",
          summary=summarize) -> Path:
    """The record of the seeds done so far (``seeds_done``; ``summary(per_seed)`` over them), written to ``a.out``
    (default ``bench/results/<stem>_<scale>_<date>.json``; strict JSON, atomic). bench/sentiment_seeds.py writes
    its record through here too."""
    import torch

    from nbkit import jsonio

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    record = {"benchmark": benchmark, "scale": a.scale, "seeds": a.seeds,
              "seeds_done": [r["seed"] for r in per_seed], "per_seed": per_seed,
              "summary": summary(per_seed), "config": configs[0], "device": device,
              "machine": a.machine or f"{os.cpu_count()} CPUs", "threads": torch.get_num_threads(),
              "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    out = a.out or ROOT / "bench" / "results" / f"{stem}_{a.scale}_{time.strftime('%Y-%m-%d')}.json"
    jsonio.write_json(out, record)
    print(f"-> {out}", flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
