"""CRF baseline on People's Daily 1998 NER: entity micro-F1 with a bootstrap interval and per-type scores.

Run: python bench/ner_baseline.py [--seed 0] [--max-iter 100] [--out bench/results/ner_baseline_cpu_DATE.json]
Loads nbkit.data.ner.load_peoples_daily_ner (seeded 80/10/10 split by unique sentence), fits
nbkit.evaluate.ner.fit_crf on the whole train split, tags validation and test, and records the
data counts, fit/predict wall times (s), entity scores (seqeval, default mode) and the 95 % bootstrap
interval over test sentences as strict JSON. The README's NER baseline numbers are rendered from that file.
Takes about 10-20 minutes on 2 shared cores (L-BFGS, single-threaded CRFsuite).
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import time
from importlib.metadata import version

from nbkit.data.ner import load_peoples_daily_ner
from nbkit.evaluate.ner import char_features, entity_f1_interval, entity_scores, fit_crf
from nbkit.jsonio import write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--c1", type=float, default=0.05)
    parser.add_argument("--c2", type=float, default=0.05)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=None, help="first lines only (a quick check; not recorded)")
    parser.add_argument("--machine", default="shared 2-core CPU container (other jobs running)")
    parser.add_argument("--out", default=f"bench/results/ner_baseline_cpu_{datetime.date.today()}.json")
    args = parser.parse_args()

    t0 = time.perf_counter()
    data = load_peoples_daily_ner(seed=args.seed, lines=args.lines)
    load_s = time.perf_counter() - t0
    print(data.table().to_string())
    t0 = time.perf_counter()
    crf = fit_crf(data.splits["train"], c1=args.c1, c2=args.c2, max_iter=args.max_iter)
    fit_s = time.perf_counter() - t0
    results = {}
    for split in ("validation", "test"):
        items = data.splits[split]
        t0 = time.perf_counter()
        pred = [list(crf.predict_single(char_features(item["tokens"]))) for item in items]
        predict_s = time.perf_counter() - t0
        gold = [item["tags"] for item in items]
        scores = entity_scores(gold, pred)
        low, high = entity_f1_interval(gold, pred, n_boot=args.n_boot, seed=args.seed)
        results[split] = {**scores, "f1_low": low, "f1_high": high, "level": 0.95, "n_boot": args.n_boot,
                          "predict_s": predict_s,
                          "chars_per_s": sum(len(i["tokens"]) for i in items) / predict_s}
        print(f"{split}: F1 {scores['f1']:.4f} [{low:.4f}, {high:.4f}]  P {scores['precision']:.4f} "
              f"R {scores['recall']:.4f}  " + "  ".join(f"{t} {v['f1']:.4f}" for t, v in scores["per_type"].items()))
    n_chars = data.report["characters"]["train"]
    payload = {
        "what": "linear-chain CRF (sklearn-crfsuite, L-BFGS) over character-window features on People's Daily "
                "1998 NER (PER/LOC/ORG, character BIO), entity-level seqeval scores (default mode)",
        "machine": args.machine, "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "date": str(datetime.date.today()),
        "versions": {p: version(p) for p in ("sklearn-crfsuite", "python-crfsuite", "seqeval")},
        "settings": {"lines": args.lines, "seed": args.seed, "c1": args.c1, "c2": args.c2, "max_iter": args.max_iter,
                     "features": "C-2..C2, C-2C-1, C-1C0, C0C1, C1C2, C-1C1, classes of C-1 C0 C1 (15 per char)"},
        "data": {**data.summary(), "entities": data.report["entities"], "sentences": data.report["sentences"],
                 "characters": data.report["characters"], "persons": data.report["persons"]},
        "load_s": load_s, "fit_s": fit_s, "fit_chars_per_s_per_iter": n_chars * args.max_iter / fit_s,
        "iterations_run": len(getattr(crf.training_log_, "iterations", []) or []) or None,
        **results,
    }
    write_json(args.out, payload)
    print(f"fit {fit_s:.0f} s on {data.report['n_train']} sentences ({n_chars} characters); wrote {args.out}")


if __name__ == "__main__":
    main()
