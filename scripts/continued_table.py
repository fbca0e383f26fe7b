#!/usr/bin/env python3
"""The "From a published checkpoint" measurements, from the recorded runs' JSON.

Two recorded benchmarks: the newest ``bench/results/continued_pretraining_*.json``
(``bench/continued_pretraining.py``: nbkit's loop vs ``transformers.Trainer``) and
``bench/results/pretrain_value_tapt/tapt.json`` (``bench/pretrain_value.py tapt``). The block goes between
the ``continued-table`` markers of docs/pretraining.md, its one-line headline between the ``continued-headline``
markers of both READMEs; a test checks both are current.

    .venv/bin/python scripts/continued_table.py           # rewrite the blocks
    .venv/bin/python scripts/continued_table.py --print   # only print them
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import READMES, markers, newest, print_or_rewrite, rel  # noqa: E402

START, END = markers("continued-table", "continued_table.py")
HEAD_START, HEAD_END = markers("continued-headline", "continued_table.py")
FILES = [ROOT / "docs" / "pretraining.md"]
TAPT = ROOT / "bench" / "results" / "pretrain_value_tapt" / "tapt.json"
MISSING = "run bench/continued_pretraining.py"


def memory_keys(med: dict) -> tuple[str, str, str]:
    """(peak key, rise key, label) of a recorded comparison: CUDA memory on a GPU run, else the process's RSS."""
    if "cuda_peak_mib" in med["nbkit"]:
        return "cuda_peak_mib", "cuda_rise_mib", "peak CUDA memory"
    return "peak_rss_mib", "rss_rise_mib", "peak RSS"


def arm_rows(d: dict, labels: dict[str, str]) -> list[str]:
    """The table of a recorded nbkit-vs-Trainer run (one row per arm, ``labels``: arm -> its name) and the
    ratio line under it (medians, per round, memory)."""
    med, ratio = d["median"], d["ratio_nbkit_over_trainer"]
    mem, rise, mem_label = memory_keys(med)
    lines = [f"| arm | tokens/s (median step) | tokens/s (wall) | {mem_label} | rise while training |",
             "|---|---|---|---|---|"]
    for arm, label in labels.items():
        m = med[arm]
        lines.append(f"| {label} | {m['tokens_per_s']:,.1f} | {m['tokens_per_s_wall']:,.1f} | {m[mem]:,.0f} MiB | "
                     f"{m[rise]:,.0f} MiB |")
    per_round = ", ".join(f"x{r:.2f}" for r in ratio["tokens_per_s_per_round"])
    return lines + ["", f"nbkit / Trainer: tokens/s x{ratio['tokens_per_s']:.2f} (medians), per round {per_round}; "
                        f"{mem_label} x{ratio[mem]:.2f}."]


def render_throughput(path: Path) -> str:
    """Intro + one row per arm (medians over rounds) + the per-round ratios, from one recorded run."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    med, c = d["median"], d["checkpoint"]
    n_params = med["nbkit"].get("n_parameters")
    size = f"{n_params / 1e6:.1f} M parameters, " if n_params else ""
    precision = d["runs"]["nbkit"][0].get("precision", "n/a")
    lines = [f"`bench/continued_pretraining.py`, {d['written_at'][:10]}, {d['device']} ({d['machine']}, "
             f"{d['threads']} threads; `{rel(path)}`): a stand-in in bert-base-chinese's layout ({size}"
             f"hidden {c['hidden_size']}, {c['num_hidden_layers']} layers, vocabulary {c['vocab_size']:,}), the "
             f"training reviews as a store prepared with its tokenizer, batch {d['batch']} x {d['block']} tokens, "
             f"{precision}, {d['timed_steps']} timed steps after {d['warmup_steps']} warm-up, {d['rounds']} rounds "
             "alternating the arms, each arm in its own process. Medians over the rounds:", ""]
    lines += arm_rows(d, {"nbkit": "nbkit `Loop` (sparse MLM head)", "trainer": "`transformers.Trainer` (`BertForMaskedLM`)"})
    return "\n".join(lines)


def render_tapt(path: Path = TAPT) -> str:
    """One paragraph: the continued (TAPT) model vs the model it started from, paired seeds, both intervals."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    pub, tapt, diff = d["runs"]["published"], d["runs"]["tapt"], d["test_accuracy_diff_tapt_vs_published"]
    acc = lambda r: f"{r['test_accuracy']['mean']:.4f} ± {r['test_accuracy']['std']:.4f}"   # noqa: E731
    pts = lambda v: f"{100 * v:+.1f}"                                                       # noqa: E731
    seeds = ", ".join(str(s) for s in d["seeds"])
    return (f"`bench/pretrain_value.py tapt`, {d['written_at'][:10]} ({d['machine']}; `{rel(path)}`): nbkit's own "
            f"model pretrained on People's Daily ({pub['steps']} steps, {pub['train_tokens'] / 1e6:.2f} M tokens, "
            f"held-out MLM loss {pub['untrained_eval_loss']:.2f} -> {pub['eval_loss']:.2f}) stands in for a published "
            f"checkpoint; continued with `init` on the training reviews ({tapt['steps']} steps, "
            f"{tapt['train_tokens'] / 1e6:.2f} M tokens, held-out loss {tapt['untrained_eval_loss']:.2f} -> "
            f"{tapt['eval_loss']:.2f}). Fine-tuned with seeds {seeds}: test accuracy {acc(pub)} from the stand-in, "
            f"{acc(tapt)} after continuing: **{pts(diff['mean'])} points [{pts(diff['ci95'][0])}, "
            f"{pts(diff['ci95'][1])}]** (paired bootstrap over test reviews), [{pts(diff['ci95_seeds'][0])}, "
            f"{pts(diff['ci95_seeds'][1])}] with the seeds resampled too; TF-IDF at the same cut "
            f"{d['baseline']['test_accuracy']:.4f}.")


def render(run: Path | None = None, tapt: Path = TAPT) -> str:
    """Both measurements, the newest throughput run unless ``run`` is given.

    Raises:
        FileNotFoundError: a recorded file is missing.
    """
    return render_throughput(run or newest("continued_pretraining_*.json", missing=MISSING)) + "\n\n" + render_tapt(tapt)


def headline(run: Path | None = None, tapt: Path = TAPT) -> str:
    """The front page's line: what continuing a checkpoint's pretraining bought, and the loop's speed against
    ``transformers.Trainer`` on a bert-base-chinese-sized model (raises as :func:`render`)."""
    d = json.loads(Path(run or newest("continued_pretraining_*.json", missing=MISSING)).read_text(encoding="utf-8"))
    t = json.loads(Path(tapt).read_text(encoding="utf-8"))
    diff = t["test_accuracy_diff_tapt_vs_published"]
    return (f"Continuing a stand-in checkpoint's pretraining (nbkit's own, trained on news) on the training reviews: **{100 * diff['mean']:+.1f} points** of "
            f"test accuracy [{100 * diff['ci95'][0]:+.1f}, {100 * diff['ci95'][1]:+.1f}] over {len(t['seeds'])} seeds "
            f"(`{rel(tapt)}`); nbkit's loop trains a model of bert-base-chinese's layout at "
            f"x{d['ratio_nbkit_over_trainer']['tokens_per_s']:.2f} the tokens/s of `transformers.Trainer` "
            f"({d['device']}, {d['written_at'][:10]}).")


def main(argv: list[str] | None = None) -> int:
    return print_or_rewrite(argv, [(render(), FILES, START, END), (headline(), READMES, HEAD_START, HEAD_END)])


if __name__ == "__main__":
    sys.exit(main())
