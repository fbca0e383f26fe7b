#!/usr/bin/env python3
"""Where the GPT crosses the n-gram lines: the learning curves recorded by ``bench/causal_seeds.py`` (each seed's
held-out perplexity at every evaluation, by training tokens) beside each seed's Kneser-Ney 2- and 3-gram, from the
newest ``bench/results/causal_curve_<scale>_<date>/seed*.json``.

Per evaluation point: the mean and sample sd over seeds; per baseline: the first point at which the GPT is below it
in every seed (training tokens, steps, minutes of training on the recording machine), or that it is not within the
measured range. The block goes between the ``causal-curve`` markers of docs/pretraining.md and the plot to
docs/img/causal_curve_<scale>.png; a test checks the block is the rendering of the recorded run.

    .venv/bin/python scripts/causal_curve.py           # rewrite the block and the plot
    .venv/bin/python scripts/causal_curve.py --print   # only print the block
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import markers, newest, print_or_rewrite, rel  # noqa: E402

START, END = markers("causal-curve", "causal_curve.py")
FILES = [ROOT / "docs" / "pretraining.md"]
PENDING = ("No learning curve recorded yet: `python bench/causal_seeds.py --scale cpu --seed N --max-steps 1700 "
           "--eval-every 170 --out bench/results/causal_curve_cpu_<date>` for N = 0, 1, 2, then "
           "`python scripts/causal_curve.py`.")


def newest_curve(root: Path = ROOT, scale: str = "cpu") -> Path | None:
    """The newest ``bench/results/causal_curve_<scale>_<date>/`` holding seed records, or None."""
    found = newest(f"causal_curve_{scale}_*/seed*.json", root)
    return found.parent if found else None


def load(folder: Path) -> list[dict]:
    """The seed records of ``folder``, in seed order."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(folder).glob("seed*.json"))]


def crossing(seeds: list[dict], model: str) -> dict | None:
    """The first evaluation point at which every seed's GPT is below that seed's ``model`` baseline: ``step``,
    ``train_tokens``, ``minutes`` (:func:`minutes`); None when none is."""
    line = [next(b["eval_perplexity"] for b in s["baselines"] if b["model"] == model) for s in seeds]
    for i, point in enumerate(seeds[0]["curve"]):
        if all(len(s["curve"]) > i and s["curve"][i]["eval_perplexity"] < ppl for s, ppl in zip(seeds, line)):
            return {"step": point["step"], "train_tokens": point["train_tokens"], "minutes": minutes(seeds, i)}
    return None


def minutes(seeds: list[dict], i: int) -> float | None:
    """The fastest seed's minutes of training to evaluation point ``i`` (None when a seed has no time): other jobs
    on a shared machine only slow a seed down, so the fastest is the closest to the machine unloaded."""
    secs = [s["curve"][i].get("elapsed_s") for s in seeds if len(s["curve"]) > i]
    return min(secs) / 60 if secs and all(v is not None for v in secs) else None


def render_run(folder: Path) -> str:
    """The curve as a table (mean ± sd per point, the baselines' mean ± sd) and where it crosses each line."""
    seeds = load(folder)
    n = len(seeds)
    sd = lambda v: f" ± {statistics.stdev(v):.1f}" if len(v) > 1 else ""                   # noqa: E731
    s0 = seeds[0]
    names = [b["model"] for b in s0["baselines"]]
    lines = [f"`bench/causal_seeds.py` learning curves, scale `{s0['scale']}`, `{s0['model']}`, {n} seeds "
             f"(`{rel(folder)}`; machine: {s0.get('machine', 'the 2-core CPU')}): {s0['steps']} steps at lr "
             f"{s0['lr']:g} (warm-up and linear decay over the whole run), batch {s0['batch_size']} x "
             f"{s0['block_size']} tokens; held-out perplexity on each seed's held-out blocks, the n-grams fitted on "
             "that seed's training text and scored on the same targets:", "",
             "| step | training tokens | minutes (fastest seed) | GPT perplexity, mean ± sd |", "|---|---|---|---|"]
    for i, point in enumerate(s0["curve"]):
        vals = [s["curve"][i]["eval_perplexity"] for s in seeds if len(s["curve"]) > i]
        took = minutes(seeds, i)
        mins = "" if took is None else f"{took:.1f}"
        lines.append(f"| {point['step']:,} | {point['train_tokens'] / 1e6:.2f} M | {mins} | "
                     f"{statistics.fmean(vals):.1f}{sd(vals)} |")
    lines.append("")
    for name in names:
        line = [next(b["eval_perplexity"] for b in s["baselines"] if b["model"] == name) for s in seeds]
        cross = crossing(seeds, name)
        where = (f"the GPT is below it in every seed from step {cross['step']:,} ({cross['train_tokens'] / 1e6:.2f} M "
                 f"training tokens" + (f", {cross['minutes']:.1f} min of training" if cross["minutes"] else "") + ")"
                 if cross else "the GPT is not below it in every seed within the measured range")
        lines.append(f"- {name}: perplexity {statistics.fmean(line):.1f}{sd(line)}; {where}.")
    lines += ["", "![GPT learning curves beside the n-gram lines](img/causal_curve_cpu.png)"]
    return "\n".join(lines)


def plot(folder: Path, out: Path) -> Path:
    """The curves (one line per seed, perplexity by training tokens) and each seed's n-gram lines, to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = load(folder)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for i, s in enumerate(seeds):
        ax.plot([p["train_tokens"] / 1e6 for p in s["curve"]], [p["eval_perplexity"] for p in s["curve"]],
                color="C0", alpha=0.8, label="GPT" if i == 0 else None)
        for j, b in enumerate(s["baselines"]):
            ax.axhline(b["eval_perplexity"], color=f"C{j + 1}", lw=0.8, ls="--",
                       label=b["model"] if i == 0 else None)
    ax.set(xlabel="training tokens (M)", ylabel="held-out perplexity", yscale="log")
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def render(folder: Path | None = None) -> str:
    """The newest cpu curve's block, or :data:`PENDING` when none is recorded."""
    folder = folder or newest_curve()
    return render_run(folder) if folder else PENDING


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = newest_curve()
    if folder and "--print" not in argv:
        print(f"wrote {rel(plot(folder, ROOT / 'docs' / 'img' / 'causal_curve_cpu.png'))}")
    return print_or_rewrite(argv, [(render(folder), FILES, START, END)])


if __name__ == "__main__":
    sys.exit(main())
