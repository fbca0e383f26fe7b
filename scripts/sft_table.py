#!/usr/bin/env python3
"""The "Recorded numbers" of instruction tuning, from the newest recorded ``bench/results/sft_<scale>_<date>.json``
(``bench/sft_cpu.py``: a GPT scored before and after SFT on the demo's held-out questions, beside TF-IDF, the CRF
and, where recorded, notebook 03's BERT).

The block goes between the ``sft-table`` markers of docs/instruct.md, and the cost of LoRA against full
fine-tuning (the newest ``bench/results/lora_<scale>_<date>.json`` of ``bench/lora.py``) between its ``lora-table``
markers; a test checks both are the rendering of the recorded runs.

    .venv/bin/python scripts/sft_table.py           # rewrite the block
    .venv/bin/python scripts/sft_table.py --print   # only print it
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import READMES, markers, newest, print_or_rewrite, rel  # noqa: E402

START, END = markers("sft-table", "sft_table.py")
HEAD_START, HEAD_END = markers("sft-headline", "sft_table.py")
LORA_START, LORA_END = markers("lora-table", "sft_table.py")
FILES = [ROOT / "docs" / "instruct.md"]
COMMAND = ("OMP_NUM_THREADS=1 python bench/sft_cpu.py --scale cpu --per-task 100 "
           "--machine \"<the machine>\"")
PENDING = (f"No recorded run yet: `{COMMAND}` records one (`bench/results/sft_cpu_<date>.json`; it first trains "
           "notebook 06's `cpu` model when none is saved), then `python scripts/sft_table.py` writes it here.")
NAMES = {"sentiment": "sentiment accuracy", "persons": "person-name F1", "places": "place-name F1"}


def model_name(init: str) -> str:
    """Where SFT started, said without a machine's path: notebook 06's folder ``.../<scale>/causal/model`` becomes
    "notebook 06's <scale> GPT", any other folder its last two parts."""
    parts = Path(init).parts
    if len(parts) >= 3 and parts[-2:] == ("causal", "model"):
        return f"notebook 06's `{parts[-3]}` GPT"
    return "`" + "/".join(parts[-2:]) + "`"


def render_run(path: Path) -> str:
    """Intro (run, model, steps, questions), the held-out loss before and after, one row per model and task (the
    value with its 95 % interval, the share of answers in the expected form), and per task how the tuned model
    stands against the best baseline."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = d["rows"]
    n = ", ".join(f"{v} {k}" for k, v in d["n_test"].items())
    pre = d.get("pretrained_now")
    started = (f"{model_name(d['init'])} ({d['model']} preset"
               + (f", pretrained in the same run: {pre['steps']} steps, held-out perplexity "
                  f"{pre['eval_perplexity']:,.0f})" if pre else ")"))
    lines = [f"`bench/sft_cpu.py`, {d['written_at'][:10]}, scale `{d['scale']}` on {d['device']} ({d['machine']}; "
             f"`{rel(path)}`): SFT from {started}, {d['steps']} steps, {d['train_tokens']:,} training tokens; "
             f"greedy answers of at most {d['max_new_tokens']} tokens to the held-out questions ({n}). Held-out loss "
             f"on the answers' tokens: {d['eval_loss_before']:.3f} before SFT, {d['eval_loss_after']:.3f} after. "
             "Sentiment accuracy, set-based micro F1 of the listed names, the share of answers in the expected form; "
             "95 % percentile bootstrap intervals over the questions. The baselines answer the same questions, fit "
             "on the texts SFT trained on:", "",
             "| model | task | score [95 % CI] | in form | n |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {NAMES.get(r['task'], r['task'])} | {r['value']:.3f} "
                     f"[{r['low']:.3f}, {r['high']:.3f}] | {r['form_share']:.0%} | {r['n']} |")
    cut = d["unfinished"]
    lines += ["", f"Answers that reached the token limit without the end-of-turn marker: {cut['before SFT']} before "
                  f"SFT, {cut['after SFT']} after, of {sum(d['n_test'].values())}."]
    if d.get("bert_whole_test") and not any(r["model"] == "notebook 03's BERT" for r in rows):
        b = d["bert_whole_test"]
        lines[-1] += (f" Notebook 03's BERT at this scale recorded test accuracy {b['test_accuracy']:.3f} over its "
                      f"whole test split ({b['n']:,} reviews; the questions above are a subset of it).")
    verdict = []
    for task in dict.fromkeys(r["task"] for r in rows):
        tuned = next((r for r in rows if r["model"] == "after SFT" and r["task"] == task), None)
        others = [r for r in rows if r["task"] == task and r["model"] not in ("before SFT", "after SFT")]
        if tuned and others:
            best = max(others, key=lambda r: r["value"])
            gap = tuned["value"] - best["value"]
            if round(gap, 3) == 0:
                verdict.append(f"{NAMES.get(task, task)} level with {best['model']}")
            else:
                word = "ahead of" if gap > 0 else "behind"
                verdict.append(f"{NAMES.get(task, task)} {abs(gap):.3f} {word} {best['model']}")
    if verdict:
        lines += ["", "After SFT the GPT is " + "; ".join(verdict) + "."]
    if d["scale"] == "smoke":
        lines += ["", "This is the `smoke` scale: a few steps of a tiny model, which shows the comparison working, not "
                      f"what SFT can do. `{COMMAND}` records the `cpu` run (it first trains notebook 06's `cpu` model "
                      "when none is saved), and `python scripts/sft_table.py` puts the newest record here."]
    return "\n".join(lines)


def render(run: Path | None = None) -> str:
    """The block of the newest recorded run of the largest scale recorded (gpu, then cpu, then smoke; ``run`` to pick
    one), or :data:`PENDING` when none is recorded."""
    run = run or _record()
    return render_run(run) if run else PENDING


LORA_PENDING = ("No recorded run yet: `OMP_NUM_THREADS=1 python bench/lora.py` records one "
                "(`bench/results/lora_cpu_<date>.json`), then `python scripts/sft_table.py` writes it here.")


def render_lora(run: Path | None = None) -> str:
    """LoRA against full fine-tuning (``bench/lora.py``'s record, ``run`` to pick one): per model the trainable
    parameters, tokens/s and peak RSS (medians over rounds) of each method and their ratio, or
    :data:`LORA_PENDING` when none is recorded."""
    run = run or newest("lora_[!l]*.json")       # lora_<scale>_<date>, not the rate sweep's lora_lr_sweep_*
    if run is None:
        return LORA_PENDING
    d = json.loads(Path(run).read_text(encoding="utf-8"))
    med, ratio = d["median"], d["ratio_lora_over_full"]
    lines = [f"`bench/lora.py`, {d['written_at'][:10]}, on {d['device']} ({d['machine']}; `{rel(run)}`): "
             f"{d['what']}; batch {d['batch']} x {d['block']} tokens, LoRA r={d['lora_r']} (alpha "
             f"{d['lora_alpha']}), medians over {d['rounds']} rounds of {d['timed_steps']} timed steps:", "",
             "| model | method | trainable parameters | tokens/s | peak RSS (MiB) |", "|---|---|---|---|---|"]
    for model, what in d["models"].items():
        for method in ("full", "lora"):
            m = med[f"{model}/{method}"]
            lines.append(f"| {what} | {method} | {m['trainable_parameters']:,.0f} | {m['tokens_per_s']:,.0f} | "
                         f"{m['peak_rss_mib']:,.0f} |")
        r = ratio[model]
        lines.append(f"| | LoRA / full | {r['trainable_parameters']:.2%} | {r['tokens_per_s']:.2f}x | "
                     f"{r['peak_rss_mib']:.2f}x |")
    lines += ["", d["noise"][:1].upper() + d["noise"][1:] + "."]
    return "\n".join(lines)


def _record() -> Path | None:
    """The newest SFT record of the largest scale recorded (gpu, then cpu, then smoke)."""
    return next(filter(None, (newest(f"sft_{scale}_*.json") for scale in ("gpu", "cpu", "smoke"))), None)


def headline(run: Path | None = None) -> str:
    """The front page's line: after SFT, each task's score beside the baseline's on the same questions;
    :data:`PENDING` when none is recorded."""
    run = run or _record()
    if run is None:
        return PENDING
    d = json.loads(Path(run).read_text(encoding="utf-8"))
    value = {(r["model"], r["task"]): r["value"] for r in d["rows"]}
    base = {"sentiment": "TF-IDF"}                                   # the names' baseline is the CRF
    said = "; ".join(f"{NAMES[t]} {value[('after SFT', t)]:.3f} vs {base.get(t, 'the CRF')} "
                     f"{value[('TF-IDF / CRF', t)]:.3f}" for t in dict.fromkeys(r["task"] for r in d["rows"]))
    return (f"At `{d['scale']}`, notebook 06's GPT after {d['steps']} SFT steps, on {sum(d['n_test'].values())} "
            f"held-out questions: **{said}** (`{rel(run)}`).")


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END), (render_lora(), FILES, LORA_START, LORA_END),
                                   (headline(), READMES, HEAD_START, HEAD_END)])


if __name__ == "__main__":
    sys.exit(main())
