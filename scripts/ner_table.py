#!/usr/bin/env python3
"""The "Named entities" measurements, from the newest recorded ``bench/results/ner_<scale>_<date>.json``
(``bench/ner_seeds.py``: fine-tuned BERT vs the CRF baseline and, where recorded, the character BiLSTM over seeds,
entity-level F1 with intervals).

The block goes between the ``ner-table`` markers of docs/ner.md, its one-line headline between the ``ner-headline``
markers of both READMEs; a test checks both are the rendering of the recorded run.

    .venv/bin/python scripts/ner_table.py           # rewrite the blocks
    .venv/bin/python scripts/ner_table.py --print   # only print them
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import READMES, markers, newest, print_or_rewrite, rel  # noqa: E402

START, END = markers("ner-table", "ner_table.py")
HEAD_START, HEAD_END = markers("ner-headline", "ner_table.py")
FILES = [ROOT / "docs" / "ner.md"]
PENDING = ("No recorded run yet: `python bench/ner_seeds.py --scale cpu --seeds 0 1 2` records one "
           "(`bench/results/ner_cpu_<date>.json`), then `python scripts/ner_table.py` writes it here.")


def encoder_name(init: str) -> str:
    """What the encoder was, said without a machine's path: the recipe's ``init`` note names a local folder by its
    path (``loaded encoder from local checkpoint '/tmp/.../runs/cpu/mlm/model'``); notebook 02's folder becomes
    "notebook 02's <scale> encoder", any other folder its last two parts."""
    import re

    head = init.split(";")[0]
    found = re.search(r"'([^']+)'", head)
    if not found:
        return head
    parts = Path(found.group(1)).parts
    if len(parts) >= 3 and parts[-2:] == ("mlm", "model"):
        return f"notebook 02's {parts[-3]} encoder"
    return head.replace(found.group(0), "'" + "/".join(parts[-2:]) + "'")


def render_run(path: Path) -> str:
    """Intro + one row per seed (the F1s with their 95 % intervals, per type, seconds) + the mean ± std over seeds,
    and who wins: on average, and on how many seeds the paired interval of the difference excludes 0. The BiLSTM
    column appears where the record has it."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    rows, s, c = d["per_seed"], d["summary"], d["config"]
    lstm = all("bilstm_f1" in r for r in rows)
    types = sorted(rows[0]["bert_per_type"])
    ci = lambda v: f"[{v[0]:.3f}, {v[1]:.3f}]"                                            # noqa: E731
    per_type = lambda r: " / ".join(f"{r.get(t, 0):.2f}" for t in types)                   # noqa: E731
    std = lambda x: "" if x["std"] is None else f" ± {x['std']:.3f}"                        # noqa: E731
    secs = lambda r: "" if r.get("wall_s") is None else f"{r['wall_s']:.0f} ({r.get('finetune_s') or 0:.0f})"  # noqa: E731
    lines = [f"`bench/ner_seeds.py`, {d['written_at'][:10]}, scale `{d['scale']}` on {d['device']} ({d['machine']}; "
             f"`{rel(path)}`): People's Daily 1998 as character BIO, {rows[0]['n_train']:,} training and "
             f"{rows[0]['n_test']:,} test sentences per seed (each seed its own split), BERT `{c['model']}` "
             f"({encoder_name(rows[0]['init'])}), max_length {c['max_length']} (stride {c['stride']}), "
             f"{c['epochs']:g} epochs, batch {c['batch_size']}, lr {c['lr']:g}; the CRF"
             f"{' and a character BiLSTM (bench/bilstm.py: 6 epochs, batch 32)' if lstm else ''} on the same training "
             "split. Entity-level micro-F1 (seqeval), "
             f"95 % bootstrap interval over test sentences ({c['n_boot']} resamples); per type {' / '.join(types)}; "
             "seconds per seed in all (BERT's fine-tuning):",
             "", "| seed | BERT F1 [95 % CI] | BERT per type | CRF F1 [95 % CI] | CRF per type | "
             + ("BiLSTM F1 [95 % CI] | BiLSTM per type | " if lstm else "") + "BERT - CRF [paired 95 % CI] | s |",
             "|---|---|---|---|---|" + ("---|---|" if lstm else "") + "---|---|"]
    for r in rows:
        ref = (f"{r['bilstm_f1']:.3f} {ci(r['bilstm_f1_interval'])} | {per_type(r['bilstm_per_type'])} | "
               if lstm else "")
        lines.append(f"| {r['seed']} | {r['bert_f1']:.3f} {ci(r['bert_f1_interval'])} | {per_type(r['bert_per_type'])} "
                     f"| {r['crf_f1']:.3f} {ci(r['crf_f1_interval'])} | {per_type(r['crf_per_type'])} | {ref}"
                     f"{r['bert_f1'] - r['crf_f1']:+.3f} {ci(r['diff_f1_interval'])} | {secs(r)} |")
    ref = f"{s['bilstm_f1']['mean']:.3f}{std(s['bilstm_f1'])} | | " if lstm else ""
    lines.append(f"| mean ± std ({s['bert_f1']['n']} seeds) | {s['bert_f1']['mean']:.3f}{std(s['bert_f1'])} | | "
                 f"{s['crf_f1']['mean']:.3f}{std(s['crf_f1'])} | | {ref}{s['diff_f1']['mean']:+.3f}{std(s['diff_f1'])} | |")
    winner = "BERT" if s["diff_f1"]["mean"] > 0 else "the CRF"
    above = sum(r["diff_f1_interval"][0] > 0 for r in rows)
    below = sum(r["diff_f1_interval"][1] < 0 for r in rows)
    lines += ["", f"Here {winner} wins on average, by {abs(s['diff_f1']['mean']):.3f} F1; the paired interval puts BERT "
                  f"above the CRF on {above} of {len(rows)} seeds, below it on {below}."]
    if lstm:
        ahead = sum(r["bert_f1"] > r["bilstm_f1"] for r in rows)
        lines[-1] += (f" Against the plain neural reference BERT is {s['diff_bilstm_f1']['mean']:+.3f} F1 on average "
                      f"(ahead on {ahead} of {len(rows)} seeds).")
    return "\n".join(lines)


def render(run: Path | None = None) -> str:
    """The newest cpu run's block (``run`` to pick one), or :data:`PENDING` when none is recorded."""
    run = run or newest("ner_cpu_*.json")
    return render_run(run) if run else PENDING


def headline(run: Path | None = None) -> str:
    """The front page's line: entity F1 over seeds of BERT, the CRF and (where recorded) the BiLSTM, and who wins;
    :data:`PENDING` when no run is recorded."""
    run = run or newest("ner_cpu_*.json")
    if run is None:
        return PENDING
    d = json.loads(Path(run).read_text(encoding="utf-8"))
    s = d["summary"]
    arms = [("BERT", "bert_f1"), ("CRF", "crf_f1"), ("character BiLSTM", "bilstm_f1")]
    said = ", ".join(f"{name} {s[k]['mean']:.3f}" + (f" ± {s[k]['std']:.3f}" if s[k]["std"] is not None else "")
                     for name, k in arms if k in s)
    winner = "BERT" if s["diff_f1"]["mean"] > 0 else "the CRF"
    return (f"At `{d['scale']}`, entity-level F1 on People's Daily over {s['bert_f1']['n']} seeds: **{said}** "
            f"(`{rel(run)}`); {winner} wins by {abs(s['diff_f1']['mean']):.3f} F1.")


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END), (headline(), READMES, HEAD_START, HEAD_END)])


if __name__ == "__main__":
    sys.exit(main())
