"""Corpus preparation with nbkit's own tokenizer vs a published checkpoint's 21,128-token BERT vocabulary,
each with and without whole-word starts: MB/s, tokens/s and peak RSS of ``prepare_corpus``, side by side.

The corpus is ``bench/corpus_scale.py``'s synthesis from the bundled text (People's Daily paragraphs and
reviews, each line 2-8 of them drawn at random, seeded), one ``.txt`` of ``--mb`` MB. The tokenizers:

- ``own``: WordPiece trained by nbkit on 16 MB of the bundled text (``corpus_scale.shared_tokenizer``,
  ``--own-vocab`` tokens: 8,000 as the README's corpus table);
- ``bert``: ``nbkit.models.standin.build_standin(layout="bert-base-chinese")``: bert-base-chinese's files
  (``vocab.txt``, ``tokenizer.json``: BERT's normalizer without lower-casing, BertPreTokenizer, WordPiece)
  with a 21,128-token vocabulary in its order of kinds (``standin.chinese_vocab``: 106 specials and unused,
  ASCII, Chinese punctuation, 20,8xx CJK ideographs from U+4E00, ``##`` + ASCII letters and digits). Its
  ``[UNK]`` share on the corpus is recorded (the real vocabulary holds fewer ideographs and more ``##`` pieces;
  in BERT's Chinese pipeline every ideograph is a one-character word either way).

Input layouts: the synthesis as one ``.txt`` (every arm) and the same lines as a wiki_zh tree (:func:`wiki_tree`:
brightmart's ``wiki_zh_2019`` layout, extension-less JSON-lines files in folders; the bert-with-words arm), the
user's case. ``--mb 100`` by default: at 20 MB the fixed costs (process and pool start, loading the tokenizer,
about 4 s) are half the time; at 100 MB a tenth. Per arm the JSON records where the time goes: the CPU seconds of
the main process and of the workers (``cpu``), and one worker's stages timed one by one (``breakdown``).

Word starts: ``segmenter="auto"`` (rjieba words for whole-word masking) or ``"none"`` (the tokenizer's own
words: no segmenter runs). Each arm is one ``prepare_corpus(..., num_workers=N)`` in its own process; RSS is
summed over its process tree every 0.2 s. The machine is shared with other engineers' jobs, so the arms run
in interleaved rounds (the order rotated each round) and the medians are reported.

``--baseline REF`` adds the with-words arms run with the code of git ``REF`` (a temporary worktree on
``PYTHONPATH``), interleaved with the others: before/after a change in the same run.

    .venv/bin/python bench/prepare_tokenizers.py [--mb 100] [--rounds 3] [--num-workers 2] [--baseline main]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout
sys.path.insert(0, str(ROOT / "bench"))

import corpus_scale  # noqa: E402

from nbkit import jsonio  # noqa: E402

QUIET_NOTE = ("measured under the session's CPU lock (no other benchmark or test on the 2 cores); the arms ran "
              "in interleaved rounds and the medians are reported")


def bert_vocab_dir(work: pathlib.Path) -> str:
    """The bert-base-chinese stand-in's folder (built once under ``work``)."""
    from nbkit.models.standin import build_standin

    d = work / "bert-base-chinese"
    if not (d / "tokenizer.json").is_file():
        build_standin(d, layout="bert-base-chinese")
    return str(d)


def unk_share(tokenizer: str, files: list[str], n_lines: int = 2000) -> float:
    """Share of ``[UNK]`` among the tokens of the first ``n_lines`` lines (0-1)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    with open(files[0], encoding="utf-8") as fh:
        lines = [line for _, line in zip(range(n_lines), fh)]
    ids = [i for row in tok(lines, add_special_tokens=False)["input_ids"] for i in row]
    return sum(i == tok.unk_token_id for i in ids) / max(1, len(ids))


def wiki_tree(txt: str, work: pathlib.Path) -> str:
    """The lines of ``txt`` as a wiki_zh tree (brightmart's ``wiki_zh_2019`` layout, written once): folders
    ``AA``, ``AB``, ... of extension-less files ``wiki_00``..``wiki_99``, 200 JSON lines each,
    ``{"id", "url", "title", "text"}`` with a ``url`` on zh.wikipedia.org (so ``min_cjk_share="auto"`` applies
    the Wikipedia share) and the text as WikiExtractor writes it (the title, a blank line, the article)."""
    d = work / (pathlib.Path(txt).parent.name + "_wiki")
    done = d.with_name(d.name + ".done")   # beside the tree: a file in it would be read as corpus
    if done.is_file():
        return str(d)
    shutil.rmtree(d, ignore_errors=True)
    with open(txt, encoding="utf-8") as fh:
        k, out = 0, None
        for line in fh:
            if k % 200 == 0:
                if out:
                    out.close()
                f = k // 200
                folder = d / f"{chr(65 + f // 100 // 26)}{chr(65 + f // 100 % 26)}"
                folder.mkdir(parents=True, exist_ok=True)
                out = open(folder / f"wiki_{f % 100:02d}", "w", encoding="utf-8")
            k += 1
            text = line.rstrip("\n")
            out.write(jsonio.dumps({"id": str(k), "url": f"https://zh.wikipedia.org/wiki?curid={k}",
                                    "title": text[:8], "text": f"{text[:8]}\n\n{text}"}) + "\n")
        if out:
            out.close()
    done.write_text("done")
    return str(d)


def breakdown(inputs, tokenizer: str, segmenter: str, mb: float) -> dict:
    """Where one worker's time goes on the first ``mb`` MB (one process, the stages of
    ``nbkit.corpus.worker.encode_chunk`` timed one by one): seconds and the share of each."""
    import unicodedata  # noqa: F401

    from nbkit.corpus import manifest as mf
    from nbkit.corpus import segment, worker
    from nbkit.corpus.fastpath import encode_texts
    from nbkit.corpus.readers import iter_chunks
    from nbkit.corpus.sources import fingerprint, resolve_inputs
    from nbkit.corpus.vocab import tokenizer_identity
    from nbkit.corpus.wikimarkup import strip_markup

    s = mf.check_settings({"tokenizer": tokenizer, "segmenter": segmenter})
    s["segmenter"] = segment.resolve(s["segmenter"])
    s.update(tokenizer_identity(tokenizer))
    sources = resolve_inputs(inputs)
    job = {k: s[k] for k in ("errors", "text_field", "max_chars", "min_chars", "min_cjk_share", "segmenter",
                             "unicode_normalization", "strip_markup")}
    job["cjk_share_by_source"] = {i: mf.WIKI_CJK_SHARE for i, x in enumerate(sources) if x.wikipedia}
    tf = pathlib.Path(tokenizer) / "tokenizer.json"
    job.update(tokenizer_file=str(tf), tokenizer_json_sha256=fingerprint(tf), dtype="uint16", sep_id=0)
    tok, table, cut, cont = worker._tools(job)
    t = dict.fromkeys(("read", "decode_parse", "markup", "clean_rest", "doc_key", "segmenter", "tokenizer",
                       "word_starts_rest"), 0.0)
    done, limit = 0, mb * 1e6
    clock = time.perf_counter
    it = iter_chunks(sources, "text")
    while done < limit:
        t0 = clock()
        chunk = next(it, None)
        t["read"] += clock() - t0
        if chunk is None:
            break
        if not hasattr(chunk, "items"):
            continue
        done += sum(map(len, chunk.items))
        t0 = clock()
        values = [worker._value(x, chunk.kind, "text") for x in chunk.items]
        t1 = clock()
        for v in values:
            if isinstance(v, str):
                strip_markup(v)
        t2 = clock()
        texts = worker.clean_chunk(chunk, job, sources[chunk.source].path)[0]
        t3 = clock()
        t["decode_parse"] += t1 - t0
        t["markup"] += t2 - t1
        t["clean_rest"] += max(0.0, (t3 - t2) - (t2 - t0))   # clean_chunk's filters and counts beyond both
        t0 = clock()
        for x in texts:
            worker.doc_key(x)
        t1 = clock()
        if cut is not None:
            for x in texts:
                cut(x)
        t2 = clock()
        encode_texts(texts, tok, table, None, cont)
        t3 = clock()
        whole = encode_texts(texts, tok, table, cut, cont) if cut is not None else None  # noqa: F841
        t4 = clock()
        t["doc_key"] += t1 - t0
        t["segmenter"] += t2 - t1
        t["tokenizer"] += t3 - t2
        t["word_starts_rest"] += max(0.0, (t4 - t3) - (t3 - t2) - (t2 - t1)) if cut is not None else 0.0
    total = sum(t.values())
    return {"mb": round(done / 1e6, 2), "seconds": {k: round(v, 3) for k, v in t.items()},
            "share": {k: round(v / total, 3) for k, v in t.items()}, "mb_per_s_one_core": round(done / 1e6 / total, 2)}


CHILD = """
import json, resource, sys, time
import nbkit
from nbkit import jsonio
from nbkit.corpus import prepare_corpus
files, out, tokenizer, segmenter, workers = json.loads(sys.argv[1]), *sys.argv[2:5], int(sys.argv[5])
t0 = time.perf_counter()
m = prepare_corpus(files, out, tokenizer=tokenizer, segmenter=segmenter, num_workers=workers, progress=False,
                   overwrite=True)
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(jsonio.dumps({"prepare_seconds": round(time.perf_counter() - t0, 3), "n_tokens": m["counts"]["n_tokens"],
                  "n_texts": m["counts"]["n_texts_kept"], "nbkit": nbkit.__file__,
                  "main_cpu_s": round(me.ru_utime + me.ru_stime, 2), "workers_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
                  "dropped": {k: v for k, v in m["dropped"].items() if v}}))
"""


def run_arm(files, out: pathlib.Path, tokenizer: str, segmenter: str, num_workers: int, code: pathlib.Path):
    """One preparation in a fresh process with ``code`` first on ``PYTHONPATH`` (its ``nbkit`` imported, before the
    editable install's): ``(result, wall s, peak RSS bytes)``."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-c", CHILD, jsonio.dumps(files), str(out), tokenizer, segmenter, str(num_workers)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True, cwd=str(code))  # CHILD is -c: no
    # __main__ file for the spawned workers to re-run
    peak = 0
    while proc.poll() is None:
        peak = max(peak, corpus_scale.tree_rss(proc))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    text = proc.stdout.read()
    if proc.returncode:
        raise RuntimeError(f"{tokenizer} {segmenter} failed ({proc.returncode}): {text[-2000:]}")
    return json.loads(text.strip().splitlines()[-1]), wall, peak


def arm_key(tok: str, segmenter: str, layout: str, code: str) -> str:
    """``own_words_this``, ``bert_nowords_this``, ``bert_words_wiki_this``, ``own_words_baseline``."""
    return f"{tok}_{'words' if segmenter == 'auto' else 'nowords'}" + ("_wiki" if layout == "wiki" else "") + f"_{code}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num-workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--own-vocab", type=int, default=8000)
    ap.add_argument("--breakdown-mb", type=float, default=10.0)
    ap.add_argument("--baseline", default=None, help="a git ref whose code runs the with-words arms too")
    ap.add_argument("--work", default="/tmp/prepare_tokenizers")
    ap.add_argument("--machine-note", default=QUIET_NOTE)
    ap.add_argument("--out", default=f"bench/results/prepare_tokenizers_{datetime.date.today()}.json")
    a = ap.parse_args(argv)
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    files = corpus_scale.synth(a.mb, work)
    inputs = {"txt": files, "wiki": [wiki_tree(files[0], work)]}
    in_mb = {k: sum(os.path.getsize(f) for f in corpus_scale_files(v)) / 1e6 for k, v in inputs.items()}
    toks = {"own": corpus_scale.shared_tokenizer(work, a.own_vocab), "bert": bert_vocab_dir(work)}
    codes = {"this": ROOT}
    tmp = None
    if a.baseline:
        tmp = tempfile.mkdtemp(prefix="prepare-baseline-")
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", tmp, a.baseline], check=True,
                       capture_output=True)
        codes["baseline"] = pathlib.Path(tmp)
    arms = [(t, seg, "txt", "this") for t in toks for seg in ("auto", "none")]
    arms += [("bert", "auto", "wiki", "this")]   # the user's case: a published vocabulary on a wiki_zh tree
    arms += [(t, "auto", lay, "baseline") for t, seg, lay, _ in arms if a.baseline and seg == "auto"]
    rows = {arm_key(*arm): {"runs": [], "tokenizer": arm[0], "word_starts": arm[1] == "auto", "layout": arm[2],
                            "code": arm[3]} for arm in arms}
    try:
        for r in range(a.rounds):
            order = arms[r % len(arms):] + arms[:r % len(arms)]   # rotated: no arm always first or last
            for t, seg, lay, c in order:
                key = arm_key(t, seg, lay, c)
                res, wall, peak = run_arm(inputs[lay], work / f"store_{key}", toks[t], seg, a.num_workers, codes[c])
                rows[key]["runs"].append({"round": r, "wall_s": round(wall, 2), "peak_rss_mib": round(peak / 2**20),
                                          **res})
                print(f"round {r} {key}: {wall:.1f} s, {in_mb[lay] / res['prepare_seconds']:.2f} MB/s", flush=True)
    finally:
        if tmp:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", tmp], capture_output=True)
    for key, row in rows.items():
        mb = in_mb[row["layout"]]
        secs = statistics.median(x["prepare_seconds"] for x in row["runs"])
        n_tokens = row["runs"][0]["n_tokens"]
        main_cpu = statistics.median(x["main_cpu_s"] for x in row["runs"])
        workers_cpu = statistics.median(x["workers_cpu_s"] for x in row["runs"])
        row.update(input_mb=round(mb, 1), seconds_median=round(secs, 2), mb_per_s=round(mb / secs, 3),
                   tokens_per_s=round(n_tokens / secs), n_tokens=n_tokens,
                   peak_rss_mib=max(x["peak_rss_mib"] for x in row["runs"]),
                   cpu={"main_s": main_cpu, "workers_s": workers_cpu,
                        "workers_busy_share": round(workers_cpu / (a.num_workers * secs), 3)})
        if row["code"] == "this":
            row["breakdown"] = breakdown(inputs[row["layout"]], toks[row["tokenizer"]],
                                         "auto" if row["word_starts"] else "none", a.breakdown_mb)
    result = {"date": str(datetime.date.today()), "cores": len(os.sched_getaffinity(0)), "num_workers": a.num_workers,
              "machine": f"{platform.system()} {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, no GPU",
              "rounds": a.rounds,
              "corpus": (f"bench/corpus_scale.py's synthesis, {in_mb['txt']:,.1f} MB of one .txt; the wiki arm: the "
                         f"same lines as a wiki_zh tree of JSON-lines files ({in_mb['wiki']:,.1f} MB with the JSON)"),
              "machine_note": a.machine_note, "baseline": a.baseline,
              "tokenizers": {"own": {"vocab_size": a.own_vocab, "how": "nbkit's WordPiece on 16 MB of the bundled text"},
                             "bert": {"vocab_size": 21128, "how": "nbkit.models.standin bert-base-chinese layout "
                                      "(chinese_vocab: specials, ASCII, Chinese punctuation, CJK from U+4E00, ##ASCII)",
                                      "unk_share": round(unk_share(toks["bert"], files), 5)}},
              "seconds": "prepare_corpus's wall time inside the arm's process (MB/s and tokens/s divide by its "
                         "median); wall_s adds the process start and imports",
              "cpu": "getrusage of the arm's process (main_s: reading, dedup, writing, start-up) and of its joined "
                     "workers (workers_s); workers_busy_share = workers_s / (num_workers x seconds), the rest the "
                     "workers waited (start-up, the main process)",
              "breakdown": "one worker's stages timed one by one in one process on the first breakdown.mb MB "
                           "(read: iter_chunks; decode_parse: bytes to str, JSON; markup: strip_markup; clean_rest: "
                           "the validity rule, long-text cuts, filters; doc_key: NFKC + blake2b; segmenter: rjieba; "
                           "tokenizer: ids by the code-point table + encode_batch; word_starts_rest: the word "
                           "bookkeeping)", "arms": rows}
    jsonio.write_json(a.out, result)
    print(f"written: {a.out}")
    return 0


def corpus_scale_files(inputs: list[str]) -> list[str]:
    """The files under ``inputs`` (a folder walked)."""
    out = []
    for x in inputs:
        p = pathlib.Path(x)
        out += [str(f) for f in sorted(p.rglob("*")) if f.is_file()] if p.is_dir() else [x]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
