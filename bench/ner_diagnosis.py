"""Diagnosis: why the cpu NER tagger lost to a plain BiLSTM, measured one suspect at a time (docs/ner.md).

Checks on the recipe's own data (``FinetuneConfig.for_scale(scale, task="ner")``, seed 0) that need no training:

- alignment: every training window decoded back (label ids -> names at the labelled sub-tokens) equals the gold
  tags of the words it covers; the count of mismatches, of words without a token and of unlabelled sub-tokens;
- balance: the share of ``O`` among the labelled characters, and the loss of always predicting the prior
  (the entropy of the tag distribution, nats: the plateau a tagger that learned nothing sits at);
- windows: how many sentences need a second window at the recipe's ``max_length``.

Then arms, each the recipe end to end with overrides (``--arm NAME key=value ...``, e.g. ``--arm random
init=random``), scored as the job scores (entity F1 on the validation split through the exported pipeline) and,
for the same model, by a direct argmax over each window (to rule out the evaluation path):

    python bench/ner_diagnosis.py --arm random init=random --arm nb02 --arm news init=runs/cpu/mlm-news/model

Writes ``--out`` (strict JSON, default ``bench/results/ner_diagnosis_<scale>_<date>.json``).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def checks(cfg, labeled, tok) -> dict:
    """The no-training checks above, on the training split."""
    from nbkit.recipes import finetuning as ft
    from nbkit.text.token_classification import encode_token_classification

    id2label = ft.id2label_of(labeled)
    items = labeled.splits["train"]
    enc = encode_token_classification(items, tok, {v: k for k, v in id2label.items()}, cfg.max_length, cfg.stride)
    mismatched = 0
    for row, (i, start), wids in zip(enc.dataset, enc.windows, (enc.word_ids[i] for i, _ in enc.windows)):
        labels = row["labels"][1:-1]                                       # [CLS] ... [SEP]
        words = wids[start:start + len(labels)]
        got = [(w, id2label[lab]) for w, lab in zip(words, labels) if lab != -100]
        want = [(w, items[i]["tags"][w]) for w in sorted(set(words))
                if not (start > 0 and w == wids[start - 1])]             # a word begun in the last window
        mismatched += got != want
    tags = Counter(t for it in items for t in it["tags"])
    n = sum(tags.values())
    entropy = -sum(c / n * math.log(c / n) for c in tags.values())
    return {"windows_checked": len(enc.windows), "windows_mismatched": mismatched,
            "n_words_without_token": enc.report["n_words_without_token"],
            "n_extra_subtokens": enc.report["n_extra_subtokens"], "o_share": tags["O"] / n,
            "prior_entropy_nats": entropy, "tag_counts": dict(tags), "n_windowed": enc.report["n_windowed"],
            "n_items": enc.report["n_items"]}


def direct_f1(model, encoded_split, id2label) -> float:
    """Entity F1 of the argmax over each window's labelled sub-tokens (no pipeline, no merge): the evaluation
    path ruled out when it equals the pipeline's on one-window sentences."""
    import torch

    from nbkit.evaluate.ner import entity_scores

    gold, pred = [], []
    model.eval()
    with torch.no_grad():
        rows = [encoded_split[i] for i in range(len(encoded_split))]
        for b in range(0, len(rows), 64):
            rs = rows[b:b + 64]
            width = max(len(r["input_ids"]) for r in rs)
            ids = torch.tensor([r["input_ids"] + [0] * (width - len(r["input_ids"])) for r in rs])
            mask = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rs])
            out = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
            for r, p in zip(rs, out):
                keep = [j for j, lab in enumerate(r["labels"]) if lab != -100]
                gold.append([id2label[r["labels"][j]] for j in keep])
                pred.append([id2label[int(p[j])] for j in keep])
    return entity_scores(gold, pred)["f1"]


def arm(name: str, overrides: dict, scale: str) -> dict:
    """One recipe run with ``overrides``: validation entity F1 through the pipeline and by direct argmax, the
    training loss curve (every log line), seconds."""
    from nbkit.recipes import finetuning as ft

    cfg = ft.FinetuneConfig.for_scale(scale, task="ner", **overrides).replace(
        progress=False, report_to="none", resume=False, eval_every=0, checkpoint_every=0)
    labeled = ft.data(cfg)
    tok = ft.tokenizer(cfg)
    encoded, _ = ft.encode(cfg, tok, labeled, splits=("train", "validation"))
    t0 = time.perf_counter()
    model, how = ft.model(cfg, tok, labeled)
    loop, result = ft.train(cfg, model, tok, {"train": encoded["train"]})
    scores = ft.evaluate_ner(cfg.replace(n_boot=200), loop.model, tok, labeled, split="validation", baseline=False)
    id2label = ft.id2label_of(labeled)
    return {"arm": name, "overrides": overrides, "init": how, "steps": result.metrics["steps"],
            "lr": cfg.lr, "epochs": cfg.epochs, "batch_size": cfg.batch_size,
            "losses": [round(h["loss"], 4) for h in loop.state.history if "loss" in h],
            "val_entity_f1": scores["report"]["f1"], "val_entity_f1_interval": list(scores["interval"]),
            "val_per_type": {t: v["f1"] for t, v in (scores["report"].get("per_type") or {}).items()},
            "val_entity_f1_direct": direct_f1(loop.model, encoded["validation"], id2label),
            "train_entity_f1_direct": direct_f1(loop.model, encoded["train"].select(range(min(1000, len(encoded["train"])))),
                                                id2label),
            "seconds": time.perf_counter() - t0}


def parse_value(text: str):
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", default="cpu")
    ap.add_argument("--arm", nargs="+", action="append", default=[], metavar="NAME [key=value ...]")
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument("--machine", default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    from nbkit import jsonio
    from nbkit.recipes import finetuning as ft

    out = a.out or ROOT / "bench" / "results" / f"ner_diagnosis_{a.scale}_{time.strftime('%Y-%m-%d')}.json"
    record = jsonio.loads_strict(out.read_text(encoding="utf-8")) if out.exists() else {"arms": []}
    record.update(scale=a.scale, machine=a.machine or f"{os.cpu_count()} CPUs")
    if not a.no_checks:
        cfg = ft.FinetuneConfig.for_scale(a.scale, task="ner", init="random")
        labeled = ft.data(cfg)
        tok = ft.tokenizer(cfg)
        record["checks"] = checks(cfg, labeled, tok)
        print("checks:", {k: v for k, v in record["checks"].items() if k != "tag_counts"}, flush=True)
    for spec in a.arm:
        name, pairs = spec[0], dict(p.split("=", 1) for p in spec[1:])
        row = arm(name, {k: parse_value(v) for k, v in pairs.items()}, a.scale)
        record["arms"] = [r for r in record["arms"] if r["arm"] != name] + [row]
        print(f"{name}: val entity F1 {row['val_entity_f1']:.3f} (direct {row['val_entity_f1_direct']:.3f}; "
              f"on 1,000 training windows {row['train_entity_f1_direct']:.3f}), "
              f"last loss {row['losses'][-1] if row['losses'] else None}, {row['seconds']:.0f} s", flush=True)
        record["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        jsonio.write_json(out, record)
    jsonio.write_json(out, record)
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
