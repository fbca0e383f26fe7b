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

Word starts: ``segmenter="auto"`` (rjieba words for whole-word masking) or ``"none"`` (the tokenizer's own
words: no segmenter runs). Each arm is one ``prepare_corpus(..., num_workers=N)`` in its own process; RSS is
summed over its process tree every 0.2 s. The machine is shared with other engineers' jobs, so the arms run
in interleaved rounds (the order rotated each round) and the medians are reported.

``--baseline REF`` adds the with-words arms run with the code of git ``REF`` (a temporary worktree on
``PYTHONPATH``), interleaved with the others: before/after a change in the same run.

    .venv/bin/python bench/prepare_tokenizers.py [--mb 20] [--rounds 3] [--num-workers 2] [--baseline main]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
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

MACHINE_NOTE = ("2-core machine shared with about 6 other engineers' jobs at the same time (load average 4-8): "
                "the arms ran in interleaved rounds and the medians are reported; absolute MB/s are lower bounds, "
                "the ratios between arms of one run are the comparison")


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


CHILD = """
import json, sys, time
import nbkit
from nbkit import jsonio
from nbkit.corpus import prepare_corpus
files, out, tokenizer, segmenter, workers = json.loads(sys.argv[1]), *sys.argv[2:5], int(sys.argv[5])
t0 = time.perf_counter()
m = prepare_corpus(files, out, tokenizer=tokenizer, segmenter=segmenter, num_workers=workers, progress=False,
                   overwrite=True)
print(jsonio.dumps({"prepare_seconds": round(time.perf_counter() - t0, 3), "n_tokens": m["counts"]["n_tokens"],
                  "n_texts": m["counts"]["n_texts_kept"], "nbkit": nbkit.__file__}))
"""


def run_arm(files, out: pathlib.Path, tokenizer: str, segmenter: str, num_workers: int, code: pathlib.Path):
    """One preparation in a fresh process with ``code`` first on ``PYTHONPATH`` (its ``nbkit`` imported, before the
    editable install's): ``(result, wall s, peak RSS bytes)``."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-c", CHILD, jsonio.dumps(files), str(out), tokenizer, segmenter, str(num_workers)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True, cwd=str(code))
    peak = 0
    while proc.poll() is None:
        peak = max(peak, corpus_scale.tree_rss(proc))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    text = proc.stdout.read()
    if proc.returncode:
        raise RuntimeError(f"{tokenizer} {segmenter} failed ({proc.returncode}): {text[-2000:]}")
    return json.loads(text.strip().splitlines()[-1]), wall, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num-workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--own-vocab", type=int, default=8000)
    ap.add_argument("--baseline", default=None, help="a git ref whose code runs the with-words arms too")
    ap.add_argument("--work", default="/tmp/prepare_tokenizers")
    ap.add_argument("--out", default=f"bench/results/prepare_tokenizers_{datetime.date.today()}.json")
    a = ap.parse_args(argv)
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    files = corpus_scale.synth(a.mb, work)
    in_mb = sum(os.path.getsize(f) for f in files) / 1e6
    toks = {"own": corpus_scale.shared_tokenizer(work, a.own_vocab), "bert": bert_vocab_dir(work)}
    codes = {"this": ROOT}
    tmp = None
    if a.baseline:
        tmp = tempfile.mkdtemp(prefix="prepare-baseline-")
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", tmp, a.baseline], check=True,
                       capture_output=True)
        codes["baseline"] = pathlib.Path(tmp)
    arms = [(t, seg, "this") for t in toks for seg in ("auto", "none")]
    arms += [(t, "auto", "baseline") for t in toks if a.baseline]
    rows: dict[str, dict] = {f"{t}_{'words' if seg == 'auto' else 'nowords'}_{c}": {"runs": []} for t, seg, c in arms}
    try:
        for r in range(a.rounds):
            order = arms[r % len(arms):] + arms[:r % len(arms)]   # rotated: no arm always first or last
            for t, seg, c in order:
                key = f"{t}_{'words' if seg == 'auto' else 'nowords'}_{c}"
                res, wall, peak = run_arm(files, work / f"store_{key}", toks[t], seg, a.num_workers, codes[c])
                rows[key]["runs"].append({"round": r, "wall_s": round(wall, 2), "peak_rss_mib": round(peak / 2**20),
                                          **res})
                print(f"round {r} {key}: {wall:.1f} s, {in_mb / res['prepare_seconds']:.2f} MB/s", flush=True)
    finally:
        if tmp:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", tmp], capture_output=True)
    for key, row in rows.items():
        t, words, code = key.split("_")
        secs = statistics.median(x["prepare_seconds"] for x in row["runs"])
        n_tokens = row["runs"][0]["n_tokens"]
        row.update(tokenizer=t, word_starts=words == "words", code=code, input_mb=round(in_mb, 1),
                   seconds_median=round(secs, 2), mb_per_s=round(in_mb / secs, 3),
                   tokens_per_s=round(n_tokens / secs), n_tokens=n_tokens,
                   peak_rss_mib=max(x["peak_rss_mib"] for x in row["runs"]))
    result = {"date": str(datetime.date.today()), "cores": len(os.sched_getaffinity(0)), "num_workers": a.num_workers,
              "rounds": a.rounds, "corpus": f"bench/corpus_scale.py's synthesis, {in_mb:,.1f} MB of one .txt",
              "machine_note": MACHINE_NOTE, "baseline": a.baseline,
              "tokenizers": {"own": {"vocab_size": a.own_vocab, "how": "nbkit's WordPiece on 16 MB of the bundled text"},
                             "bert": {"vocab_size": 21128, "how": "nbkit.models.standin bert-base-chinese layout "
                                      "(chinese_vocab: specials, ASCII, Chinese punctuation, CJK from U+4E00, ##ASCII)",
                                      "unk_share": round(unk_share(toks["bert"], files), 5)}},
              "seconds": "prepare_corpus's wall time inside the arm's process (MB/s and tokens/s divide by its "
                         "median); wall_s adds the process start and imports", "arms": rows}
    jsonio.write_json(a.out, result)
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
