#!/usr/bin/env python3
"""LoRA beside full fine-tuning at one scale, from the newest recorded ``bench/results/sentiment_lora_<scale>_<date>.json``
(``bench/sentiment_seeds.py --lora``) and ``bench/results/ner_lora_<scale>_<date>.json`` (``bench/ner_seeds.py --lora``):
per seed, both runs from the same encoder on the same split, budget and test set.

The block goes between the ``lora-finetune`` markers of docs/finetuning.md; a test checks it is the rendering of the
recorded runs.

    .venv/bin/python scripts/lora_table.py           # rewrite the block
    .venv/bin/python scripts/lora_table.py --print   # only print it
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import markers, newest, print_or_rewrite, rel  # noqa: E402

START, END = markers("lora-finetune", "lora_table.py")
FILES = [ROOT / "docs" / "finetuning.md"]
PENDING = ("No recorded run yet: `python bench/sentiment_seeds.py --scale cpu --seeds 0 1 2 --lora` and "
           "`python bench/ner_seeds.py --scale cpu --seeds 0 1 2 --lora --no-bilstm` record them, then "
           "`python scripts/lora_table.py` writes them here.")


def _ci(v) -> str:
    return f" [{v[0]:.3f}, {v[1]:.3f}]" if v else ""


def rows(sentiment: Path | None, ner: Path | None) -> list[str]:
    """One table row per task and seed: full fine-tuning's score, LoRA's, the share of weights LoRA trains, its
    rate."""
    out = []
    if sentiment:
        for r in json.loads(sentiment.read_text(encoding="utf-8"))["per_seed"]:
            full, lora = r["bert"], r["bert_lora"]
            out.append(f"| review sentiment, test accuracy | {r['seed']} | {full['accuracy']:.3f}{_ci(full['interval'])} "
                       f"| {lora['accuracy']:.3f}{_ci(lora['interval'])} | {lora['trainable_parameters']['share']:.1%} "
                       f"| {lora['lora']['lr']:g} | `{rel(sentiment)}` |")
    if ner:
        for r in json.loads(ner.read_text(encoding="utf-8"))["per_seed"]:
            out.append(f"| named entities, entity F1 | {r['seed']} | {r['bert_f1']:.3f}{_ci(r['bert_f1_interval'])} "
                       f"| {r['lora_f1']:.3f}{_ci(r['lora_f1_interval'])} "
                       f"| {r['lora_trainable_parameters']['share']:.1%} | {r['lora']['lr']:g} | `{rel(ner)}` |")
    return out


def render(scale: str = "cpu") -> str:
    """The table of the newest recorded LoRA runs at ``scale``, or :data:`PENDING`."""
    sentiment, ner = newest(f"sentiment_lora_{scale}_2*.json"), newest(f"ner_lora_{scale}_2*.json")
    body = rows(sentiment, ner)
    if not body:
        return PENDING
    return "\n".join([
        f"At `{scale}`, full fine-tuning and LoRA (the recipe's lora_* settings: r 8, alpha 16, every attention "
        "projection, the head trained) from notebook 02's encoder on the same split, steps and batch; 95 % bootstrap "
        "intervals over test examples. A task with one seed is one draw, not a spread over seeds.", "",
        "| task | seed | full fine-tuning | LoRA | weights LoRA trains | LoRA's lr | record |",
        "|---|---|---|---|---|---|---|", *body, *spread(ner, sentiment)])


def spread(ner: Path | None, sentiment: Path | None = None) -> list[str]:
    """A line of mean ± standard deviation over seeds (full, LoRA, LoRA - full, paired by seed) for each task whose
    record holds more than one seed; else nothing."""
    ms = lambda x: f"{x['mean']:.3f} ± {x['std']:.3f}"                                   # noqa: E731
    out = []
    for path, what, full, lora, diff in ((sentiment, "Review sentiment (test accuracy)", "bert_accuracy",
                                          "bert_lora_accuracy", "diff_lora_accuracy"),
                                         (ner, "Named entities", "bert_f1", "lora_f1", "diff_lora_f1")):
        s = json.loads(path.read_text(encoding="utf-8"))["summary"] if path else {}
        if diff in s and s[diff]["n"] >= 2:
            out += ["", f"{what} over {s[lora]['n']} seeds (mean ± standard deviation): full fine-tuning "
                        f"{ms(s[full])}, LoRA {ms(s[lora])}, LoRA - full {ms(s[diff])} (paired by seed)."]
    return out


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END)])


if __name__ == "__main__":
    sys.exit(main())
