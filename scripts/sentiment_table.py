#!/usr/bin/env python3
"""The review-sentiment measurements over seeds, from the newest recorded ``bench/results/sentiment_<scale>_<date>.json``
(``bench/sentiment_seeds.py``: notebook 03's fine-tuned BERT beside TF-IDF and a character BiLSTM on the same splits).

The block goes between the ``sentiment-table`` markers of docs/finetuning.md, its one-line headline between the
``sentiment-headline`` markers of both READMEs; a test checks both are the rendering of the recorded run.

    .venv/bin/python scripts/sentiment_table.py           # rewrite the blocks
    .venv/bin/python scripts/sentiment_table.py --print   # only print them
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import READMES, markers, newest, print_or_rewrite, rel  # noqa: E402
from ner_table import encoder_name  # noqa: E402

START, END = markers("sentiment-table", "sentiment_table.py")
HEAD_START, HEAD_END = markers("sentiment-headline", "sentiment_table.py")
FILES = [ROOT / "docs" / "finetuning.md"]
PENDING = ("No recorded run yet: `python bench/sentiment_seeds.py --scale cpu --seeds 0 1 2` records one "
           "(`bench/results/sentiment_cpu_<date>.json`), then `python scripts/sentiment_table.py` writes it here.")
ARMS = {"bert": "fine-tuned BERT", "tfidf_cut": "TF-IDF + LR, same cut", "tfidf": "TF-IDF + LR, full text",
        "bilstm": "character BiLSTM, same cut"}


def render_run(path: Path) -> str:
    """Intro + one row per seed (each arm's test accuracy, BERT's and the BiLSTM's with a 95 % interval) + the mean
    ± std over seeds of accuracy and macro-F1, and where BERT stands against each of the others."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    rows, s, c = d["per_seed"], d["summary"], d["config"]
    ci = lambda v: f" [{v[0]:.3f}, {v[1]:.3f}]" if v else ""                               # noqa: E731
    std = lambda x: "" if x["std"] is None else f" ± {x['std']:.3f}"                        # noqa: E731
    cut = rows[0].get("truncated_fraction")
    lines = [f"`bench/sentiment_seeds.py`, {d['written_at'][:10]}, scale `{d['scale']}` on {d['device']} "
             f"({d['machine']}; `{rel(path)}`): notebook 03's recipe per seed (each seed its own deduplicated split: "
             f"{rows[0]['n_train']:,} training and {rows[0]['n_test']:,} test reviews), BERT `{c['model']}` "
             f"({encoder_name(rows[0]['init'])}), max_length {c['max_length']}"
             + (f" ({cut:.0%} of test reviews cut)" if cut is not None else "")
             + f", {c['epochs']:g} epochs, lr {c['lr']:g}; TF-IDF character 1-3-grams + logistic regression on the full "
             f"texts and at BERT's cut; the character BiLSTM (bench/bilstm.py) at the same cut "
             f"({rows[0]['bilstm']['max_chars']} characters), {rows[0]['bilstm']['steps']} steps. Test accuracy, 95 % "
             "bootstrap interval over test reviews:",
             "", "| seed | " + " | ".join(ARMS.values()) + " |", "|---" * (len(ARMS) + 1) + "|"]
    for r in rows:
        lines.append(f"| {r['seed']} | " + " | ".join(f"{r[a]['accuracy']:.3f}{ci(r[a].get('interval'))}" for a in ARMS)
                     + " |")
    for m in ("accuracy", "macro_f1"):
        lines.append(f"| {m.replace('_', '-')}, mean ± std ({len(rows)} seeds) | "
                     + " | ".join(f"{s[f'{a}_{m}']['mean']:.3f}{std(s[f'{a}_{m}'])}" for a in ARMS) + " |")
    bert = s["bert_accuracy"]["mean"]
    said = [f"{ARMS[a]} {bert - s[f'{a}_accuracy']['mean']:+.3f} (ahead on "
            f"{sum(r['bert']['accuracy'] > r[a]['accuracy'] for r in rows)} of {len(rows)} seeds)"
            for a in ARMS if a != "bert"]
    lines += ["", "BERT's accuracy against each, mean over seeds: " + "; ".join(said) + "."]
    return "\n".join(lines)


def render(run: Path | None = None) -> str:
    """The newest cpu run's block (``run`` to pick one), or :data:`PENDING` when none is recorded."""
    run = run or newest("sentiment_cpu_*.json")
    return render_run(run) if run else PENDING


def headline(run: Path | None = None) -> str:
    """The front page's line: test accuracy over seeds of each arm, BERT first; :data:`PENDING` when none is
    recorded."""
    run = run or newest("sentiment_cpu_*.json")
    if run is None:
        return PENDING
    d = json.loads(Path(run).read_text(encoding="utf-8"))
    s = d["summary"]
    said = "; ".join(f"{ARMS[a]} {s[f'{a}_accuracy']['mean']:.3f}"
                     + (f" ± {s[f'{a}_accuracy']['std']:.3f}" if s[f"{a}_accuracy"]["std"] is not None else "")
                     for a in ARMS if f"{a}_accuracy" in s)
    return (f"At `{d['scale']}`, review sentiment test accuracy over {s['bert_accuracy']['n']} seeds: **{said}** "
            f"(`{rel(run)}`).")


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END), (headline(), READMES, HEAD_START, HEAD_END)])


if __name__ == "__main__":
    sys.exit(main())
