#!/usr/bin/env python3
"""The "nbkit's SFT beside TRL" measurements, from the newest recorded ``bench/results/sft_vs_trl_cpu_<date>.json``
(``bench/sft_vs_trl.py``: nbkit's SFT against ``trl.SFTTrainer(assistant_only_loss=True)`` and nbkit's SFT with LoRA,
the same model, conversations, batch, precision, steps and lr, each arm in its own process over interleaved rounds).

The block goes between the ``sft-bench-table`` markers of docs/instruct.md; a test checks it is the rendering of the
recorded run.

    .venv/bin/python scripts/sft_bench_table.py           # rewrite the block
    .venv/bin/python scripts/sft_bench_table.py --print   # only print it
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import markers, newest, num, print_or_rewrite, rel  # noqa: E402

START, END = markers("sft-bench-table", "sft_bench_table.py")
FILES = [ROOT / "docs" / "instruct.md"]
PENDING = ("No recorded run yet: `OMP_NUM_THREADS=1 python bench/sft_vs_trl.py` records one "
           "(`bench/results/sft_vs_trl_cpu_<date>.json`), then `python scripts/sft_bench_table.py` writes it here.")
ARMS = (("nbkit", "nbkit SFT"), ("trl", "TRL `SFTTrainer`"), ("lora", "nbkit SFT + LoRA"))
GOAL = 1.2   # issue 49: nbkit's tokens/s at least this many times TRL's


def render_run(path: Path) -> str:
    """Intro, one column per arm (medians over rounds: tokens/s non-padding and padded, padding share, peak RSS and
    its rise, trainable parameters, held-out assistant loss before and after), then the ratios per round and of the
    medians, and whether nbkit reached :data:`GOAL` x TRL's tokens/s."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    med, ratios, runs, data = d["median"], d["ratios"], d["runs"], d["data"]
    share = {arm: sum(x["padding_share"] for x in runs[arm]) / len(runs[arm]) for arm, _ in ARMS}
    labels_equal = all(x.get("labels_equal_nbkit") for x in runs["trl"])
    v = d["versions"]
    lines = [f"`bench/sft_vs_trl.py`, {d['written_at'][:10]}, on {d['device']} ({d['machine']}, {d['threads']} thread "
             f"per arm; `{rel(path)}`): `GPT2LMHeadModel` preset `{d['model']}` from random weights, nbkit's WordPiece "
             f"with its chat template, {data['n_written']:,} demo conversations that fit {d['block']} tokens "
             f"({d['data']['eval_fraction']:.0%} held out), batch {d['batch']}, {d['precision']}, "
             f"{d['warmup_steps']} warm-up + {d['timed_steps']} timed steps, each arm in its own process, "
             f"{d['rounds']} interleaved rounds (A B B A); torch {v['torch']}, transformers {v['transformers']}, "
             f"trl {v['trl']}. Tokens/s count the non-padding tokens (prompt, markers and answer) of the timed "
             f"steps; medians over rounds. TRL's labels on the same conversations are "
             f"{'the same as' if labels_equal else 'NOT the same as'} nbkit's. Timings on a shared CPU are noisy.",
             "", "| | " + " | ".join(name for _, name in ARMS) + " |", "|---|---|---|---|"]
    row = lambda label, f: lines.append(f"| {label} | " + " | ".join(f(a) for a, _ in ARMS) + " |")  # noqa: E731
    row("tokens/s (non-padding)", lambda a: num(med[a]["tokens_per_s"]))
    row("tokens/s (padded batch)", lambda a: num(med[a]["padded_tokens_per_s"]))
    row("padding share of the batches", lambda a: f"{share[a]:.0%}")
    row("peak RSS, MiB (rise in training)", lambda a: f"{num(med[a]['peak_rss_mib'])} (+{num(med[a]['rss_rise_mib'])})")
    row("trainable parameters", lambda a: num(med[a]["trainable_parameters"]))
    row("held-out assistant loss, before → after", lambda a: f"{med[a]['untrained_eval_loss']:.3f} → "
                                                              f"{med[a]['eval_loss']:.3f}")
    nt, lf = ratios["nbkit_over_trl"], ratios["lora_over_full"]
    same = {x["timed_tokens"] for x in runs["nbkit"] + runs["trl"]}
    scored = med["nbkit"]["label_tokens_per_s"] / med["nbkit"]["tokens_per_s"]
    per = lambda r: ", ".join(f"{x:.2f}" for x in r["tokens_per_s_per_round"])  # noqa: E731
    met = "reaches" if nt["tokens_per_s"] >= GOAL else "misses"
    lines += ["", f"nbkit / TRL tokens/s: **{nt['tokens_per_s']:.2f}x** over the medians (per round {per(nt)}), "
                  f"which {met} the goal of {GOAL:g}x; peak RSS {nt['peak_rss_mib']:.2f}x. "
                  f"LoRA / full: tokens/s {lf['tokens_per_s']:.2f}x (per round {per(lf)}), peak RSS "
                  f"{lf['peak_rss_mib']:.2f}x, trainable parameters {lf['trainable_parameters']:.1%}; from random "
                  f"weights LoRA (r={d['lora_r']}, alpha {d['lora_alpha']}) moves the held-out loss less in "
                  f"{d['timed_steps'] + d['warmup_steps']} steps, so its loss is no score of LoRA on a pretrained model.",
              "", ("nbkit and TRL trained on the same batches (" + num(next(iter(same))) + " non-padding tokens in the "
                   "timed steps of every run) and " if len(same) == 1 else "nbkit and TRL saw batches of different "
                   "token counts and ") + f"ended at held-out losses {med['nbkit']['eval_loss']:.4f} and "
              f"{med['trl']['eval_loss']:.4f}. Where the time goes: only {scored:.1%} of the non-padding tokens are "
              "the assistant's (the loss's); nbkit's loop sends only those positions through the output layer, fused "
              "with the cross-entropy (`nbkit.train.loss.linear_cross_entropy_sum`), while TRL's fused head compacts "
              "to the labelled positions only where Triton runs (a GPU) and on a CPU projects every position onto the "
              "vocabulary and computes its entropy metric there too. On a GPU the gap will be smaller; this run says "
              "nothing about it."]
    return "\n".join(lines)


def render(run: Path | None = None) -> str:
    """The newest cpu run's block (``run`` to pick one), or :data:`PENDING` when none is recorded."""
    run = run or newest("sft_vs_trl_cpu_*.json")
    return render_run(run) if run else PENDING


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END)])


if __name__ == "__main__":
    sys.exit(main())
