"""The corpus-preparation table of docs/corpus.md, from ``bench/corpus_scale.py``'s recorded JSON, and the rows by
tokenizer and word starts from ``bench/prepare_tokenizers.py``'s.

Every number comes from the files (the newest ``bench/results/corpus_scale_*.json`` unless a path is
given, and the newest ``bench/results/prepare_tokenizers_*.json``). The block goes between the ``corpus-table``
markers of docs/corpus.md, its one-line headline between the ``corpus-headline`` markers of both READMEs; a test
checks both are current. Corpus
sizes are MB of uncompressed UTF-8 text (the run key, e.g. ``nbkit_2000mb``); MB/s divides that by
the wall time, so a compressed input is not counted at its smaller size on disk.

    .venv/bin/python scripts/corpus_table.py           # rewrite the blocks
    .venv/bin/python scripts/corpus_table.py --print   # only print them
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import READMES, markers, newest, num, print_or_rewrite, rel  # noqa: E402

START, END = markers("corpus-table", "corpus_table.py")
HEAD_START, HEAD_END = markers("corpus-headline", "corpus_table.py")
FILES = [ROOT / "docs" / "corpus.md"]
MISSING = "run bench/corpus_scale.py first"
ARMS = (("nbkit", "nbkit store (rjieba words, dedup, held-out)"), ("hf", "HF `run_mlm.py` recipe (no words)"))


TOKENIZER_LABELS = {"own": "nbkit's own (WordPiece trained on the bundled text, {vocab_size:,} tokens)",
                    "bert": "bert-base-chinese layout ({vocab_size:,} tokens)"}


STAGES = {"read": "reading", "decode_parse": "decoding and JSON", "markup": "markup stripping",
          "clean_rest": "validity rule and filters", "doc_key": "dedup key (NFKC + hash)", "segmenter": "rjieba",
          "tokenizer": "token ids", "word_starts_rest": "word starts"}


def render_tokenizers(path: Path) -> str:
    """Intro line + one row per (tokenizer, word starts, input layout), with the baseline code's MB/s where
    recorded; then where one worker's time goes (the recorded ``breakdown``) and how busy the workers were."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    arms = d["arms"]
    base = d.get("baseline") if any(k.endswith("_baseline") for k in arms) else None   # asked for and run
    head = "| tokenizer | word starts | input | MB/s | tokens/s | peak RSS, all processes |"
    rule = "|---|---|---|---|---|---|"
    if base:
        head += f" MB/s before (`{base}`) |"
        rule += "---|"
    lines = [f"By tokenizer and word starts, measured {d['date']} by `bench/prepare_tokenizers.py` "
             f"(`prepare_corpus`, `num_workers={d['num_workers']}`, {d['corpus']}; median of {d['rounds']} "
             f"interleaved rounds: {d['machine_note']}):", "", head, rule]
    order = [(tok, words, lay) for tok in ("own", "bert") for words in ("words", "nowords") for lay in ("", "_wiki")]
    for tok, words, lay in order:
        r = arms.get(f"{tok}_{words}{lay}_this")
        if r is None:
            continue
        label = TOKENIZER_LABELS[tok].format(**d["tokenizers"][tok])
        ws = "rjieba words" if words == "words" else "none (`segmenter=\"none\"`: the tokenizer's words)"
        where = "wiki_zh tree (JSON lines in folders)" if lay else "one `.txt`"
        row = (f"| {label} | {ws} | {where} | {num(r['mb_per_s'], '.2f')} | {num(r['tokens_per_s'])} | "
               f"{num(r['peak_rss_mib'], ',.0f', ' MiB')} |")
        if base:
            b = arms.get(f"{tok}_{words}{lay}_baseline")
            row += f" {num(b['mb_per_s'] if b else None, '.2f')} |"
        lines.append(row)
    unk = d["tokenizers"]["bert"].get("unk_share")
    if unk is not None:
        lines += ["", f"The BERT vocabulary is `nbkit.models.standin.chinese_vocab()` (bert-base-chinese's size and order "
                      f"of kinds, built locally); on this corpus {100 * unk:.2f} % of its tokens are `[UNK]`."]
    parts = []
    for key, what in (("bert_words_this", "BERT vocabulary, rjieba words, `.txt`"),
                      ("bert_words_wiki_this", "the same on the wiki_zh tree")):
        r = arms.get(key)
        if r is None or "breakdown" not in r:
            continue
        share = sorted(r["breakdown"]["share"].items(), key=lambda kv: -kv[1])
        top = ", ".join(f"{STAGES.get(k, k)} {100 * v:.0f} %" for k, v in share if v >= 0.03)
        busy = r.get("cpu", {}).get("workers_busy_share")
        parts.append(f"{what}: {top} ({r['breakdown']['mb_per_s_one_core']:.2f} MB/s on one core"
                     + (f"; the workers were busy {100 * busy:.0f} % of the preparation" if busy is not None else "")
                     + ")")
    if parts:
        lines += ["", "Where one worker's time goes (`breakdown` in the JSON): " + "; ".join(parts) + "."]
    return "\n".join(lines)


def render(path: Path, tokenizers: Path | None | str = "latest") -> str:
    """Intro line + one row per (corpus size, arm) + the ratios of nbkit over HF where both ran; then
    :func:`render_tokenizers` of ``tokenizers`` (``"latest"``: the newest recorded run; None: left out)."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    runs = d["runs"]
    sizes = sorted({int(m.group(1)) for k in runs if (m := re.fullmatch(r"\w+?_(\d+)mb", k))})
    lines = [f"Measured {d['date']} by `bench/corpus_scale.py` on a {d['cores']}-core CPU machine, "
             f"`num_workers={d['num_workers']}`, block {d['block_size']}, vocabulary {d['vocab_size']:,}; "
             f"corpora synthesised from the bundled text ({d.get('machine_note', '')}).", "",
             "| corpus (text) | arm | time | MB/s | peak RSS, all processes | disk | read blocks/s (collator) |",
             "|---|---|---|---|---|---|---|"]
    ratios = []
    for size in sizes:
        row = {}
        for arm, label in ARMS:
            r = runs.get(f"{arm}_{size}mb")
            if r is None:
                continue
            row[arm] = r
            mbs = size / r["seconds"] if r.get("seconds") else None
            lines.append(f"| {size:,} MB | {label} | {num(r.get('seconds'), ',.1f', ' s')} | {num(mbs, '.2f')} | "
                         f"{num(r.get('peak_rss_mib'), ',.0f', ' MiB')} | {num(r.get('disk_mb'), ',.1f', ' MB')} | "
                         f"{num(r.get('read_blocks_per_s'))} |")
        if len(row) == 2 and row["nbkit"].get("seconds") and row["hf"].get("seconds"):
            ratios.append(f"{size:,} MB: x{row['hf']['seconds'] / row['nbkit']['seconds']:.1f} faster, "
                          f"x{row['hf']['peak_rss_mib'] / row['nbkit']['peak_rss_mib']:.1f} less memory, "
                          f"x{row['hf']['disk_mb'] / row['nbkit']['disk_mb']:.1f} less disk")
    if ratios:
        lines += ["", "nbkit's store vs HF's recipe, same run: " + "; ".join(ratios) + "."]
    big = max((size for size in sizes if f"nbkit_{size}mb" in runs), default=None)
    if big is not None:
        r = runs[f"nbkit_{big}mb"]
        lines += ["", f"What to expect for {big:,} MB of text on this machine: {num(r['seconds'] / 60, '.1f')} min "
                      f"with {d['num_workers']} workers, {num(r['peak_rss_mib'])} MiB of memory for all processes together, "
                      f"{num(r['disk_mb'] / big, '.2f')} MB of store per MB of text "
                      f"({num(r.get('n_tokens'))} tokens in {num(r.get('n_texts'))} texts)."]
    old = [f"{k.split('_')[1][:-2]} MB" for k, r in sorted(runs.items(), key=lambda kv: int(kv[0].split("_")[1][:-2]))
           if k.startswith("nbkit_") and "store_text" not in r]   # measured before the text followed its tokenizer
    if old:
        lines += ["", f"When the nbkit rows at {', '.join(old)} were measured the store NFKC-normalised every text; it "
                      "now applies its tokenizer's own normalisation (none for nbkit's default tokenizer), and a new "
                      "run records which (`store_text`)."]
    missing = [f"{size:,} MB" for size in sizes if f"hf_{size}mb" not in runs]
    if missing:
        lines.append(f"HF's recipe was not recorded at {', '.join(missing)}.")
    if tokenizers == "latest":
        tokenizers = newest("prepare_tokenizers_*.json")
    if tokenizers is not None:
        lines += ["", render_tokenizers(Path(tokenizers))]
    return "\n".join(lines)


def headline(path: Path | None = None) -> str:
    """The front page's line: the largest corpus the store prepared, its time, memory and disk, and the same
    against HF's ``run_mlm.py`` recipe where both ran (raises as :func:`main` when nothing is recorded)."""
    path = Path(path or newest("corpus_scale_*.json", missing=MISSING))
    d = json.loads(path.read_text(encoding="utf-8"))
    runs = d["runs"]
    big = max(int(k.split("_")[1][:-2]) for k in runs if k.startswith("nbkit_"))
    r, hf = runs[f"nbkit_{big}mb"], runs.get(f"hf_{big}mb")
    line = (f"{big:,} MB of text prepared into a store in **{r['seconds'] / 60:.1f} min** with {d['num_workers']} "
            f"workers on a {d['cores']}-core CPU, {num(r['peak_rss_mib'])} MiB of memory")
    if hf:
        line += (f" (HF's `run_mlm.py` recipe: x{hf['seconds'] / r['seconds']:.1f} the time, "
                 f"x{hf['peak_rss_mib'] / r['peak_rss_mib']:.1f} the memory)")
    return line + f" (`{rel(path)}`)."


def main(argv: list[str] | None = None) -> int:
    block = render(newest("corpus_scale_*.json", missing=MISSING))
    return print_or_rewrite(argv, [(block, FILES, START, END), (headline(), READMES, HEAD_START, HEAD_END)])


if __name__ == "__main__":
    raise SystemExit(main())
