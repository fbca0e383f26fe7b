#!/usr/bin/env python3
"""The "A Chinese GPT" measurements, from the recorded runs' JSON.

Three recorded sources: the newest ``bench/results/causal_vs_trainer_*.json`` (``bench/causal_vs_trainer.py``:
nbkit's loop vs ``transformers.Trainer`` on the same GPT-2) and, when one is recorded, the newest
``bench/results/notebook06_*.json`` (notebook 06's run: the GPT's held-out perplexity beside the bigram and
trigram baselines, written by ``record``), and the newest ``bench/results/causal_seeds_*.json`` (the same recipe
over several seeds: ``bench/causal_seeds.py --summary``). The block goes between the ``causal-table`` markers of
docs/pretraining.md, its one-line headline between the ``causal-headline`` markers of both READMEs; a test checks
both are current.

    .venv/bin/python scripts/causal_table.py                    # rewrite the blocks
    .venv/bin/python scripts/causal_table.py --print            # only print them
    .venv/bin/python scripts/causal_table.py record runs/cpu/causal [--machine "..."]   # notebook 06's run -> JSON
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from blocks import READMES, markers, newest, print_or_rewrite, rel  # noqa: E402
from continued_table import arm_rows  # noqa: E402

START, END = markers("causal-table", "causal_table.py")
HEAD_START, HEAD_END = markers("causal-headline", "causal_table.py")
FILES = [ROOT / "docs" / "pretraining.md"]
MISSING = "run bench/causal_vs_trainer.py"


def render_throughput(path: Path) -> str:
    """Intro + one row per arm (medians over rounds) + the per-round ratios, from one recorded run."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    med = d["median"]
    n_params = med["nbkit"].get("n_parameters")
    size = f", {n_params / 1e6:.2f} M parameters" if n_params else ""
    precision = d["runs"]["nbkit"][0].get("precision", "n/a")
    lines = [f"`bench/causal_vs_trainer.py`, {d['written_at'][:10]}, {d['device']} ({d['machine']}, "
             f"{d['threads']} threads; `{rel(path)}`): the same `GPT2LMHeadModel` (preset `{d['model']}`{size}) "
             f"on the same store blocks of the training reviews, batch {d['batch']} x {d['block']} tokens, "
             f"{precision}, {d['timed_steps']} timed steps after {d['warmup_steps']} warm-up, {d['rounds']} rounds "
             "alternating the arms, each arm in its own process. Medians over the rounds:", ""]
    fused = d["runs"]["nbkit"][0].get("fused_loss")   # recorded since the loop fuses the output layer with the loss
    lines += arm_rows(d, {"nbkit": "nbkit `Loop` (`CausalCollator`"
                                   + (", output layer fused with the loss" if fused else "") + ")",
                          "trainer": "`transformers.Trainer` (`DataCollatorForLanguageModeling(mlm=False)`)"})
    return "\n".join(lines)


def render_notebook(path: Path) -> str:
    """Notebook 06's recorded run: the GPT beside the n-gram baselines on the same held-out targets."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    set_ = ", ".join(f"`{k}={v}`" for k, v in d.get("overrides", {}).items()) or "no overrides"
    minutes = d.get("wall_s")
    took = f", {minutes / 60:.1f} minutes for the notebook" if minutes else ""
    lines = [f"Notebook `06_chinese_gpt`, {d['written_at'][:10]}, `NBKIT_SCALE={d['scale']}` ({set_}; "
             f"{d['machine']}{took}; `{rel(path)}`): held-out perplexity on the same "
             f"{d['rows'][0]['eval_tokens']:,} held-out targets, and the training tokens each model read:", "",
             "| model | held-out perplexity | training tokens read |", "|---|---|---|"]
    for r in d["rows"]:
        lines.append(f"| {r['model']} | {r['eval_perplexity']:,.1f} | {r['train_tokens']:,} |")
    gpt, beats = d["rows"][0]["model"], d["beats"]
    verdict = "; ".join(f"{'beats' if won else 'does not beat'} the {name}" for name, won in beats.items())
    lines += ["", f"{gpt} {verdict} ({d['steps']:,} steps at {d['tokens_per_s']:,.0f} tokens/s)."]
    return "\n".join(lines)


def render_seeds(path: Path) -> str:
    """``bench/causal_seeds.py``'s summary: each model over seeds (mean ± sd, range) and the verdicts."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    n = d["n_seeds"]

    def cell(g):
        sd = f" ± {g['sd']:,.1f}" if g["sd"] is not None else ""
        return f"{g['mean']:,.1f}{sd} ({g['min']:,.1f} to {g['max']:,.1f})"

    tokens = [s["train_tokens"] for s in d["seeds"]]
    lines = [f"`bench/causal_seeds.py`, {d['written_at'][:10]}, `NBKIT_SCALE={d['scale']}` ({d['machine']}; "
             f"`{rel(path)}`): the recipe of notebook 06 over {n} seed{'s' if n > 1 else ''}, held-out perplexity "
             "mean ± sd (range) over the seeds, each seed's baselines fitted on its training text and scored on "
             "its GPT's held-out targets:", "",
             "| model | held-out perplexity | training tokens read (per seed) | training time |", "|---|---|---|---|",
             f"| GPT ({d['model']}) | {cell(d['gpt_perplexity'])} | {', '.join(f'{t:,}' for t in tokens)} | "
             f"{d['train_s']['mean'] / 60:.1f} min (max {d['train_s']['max'] / 60:.1f}) |"]
    lines += [f"| {b['model']} | {cell(b['eval_perplexity'])} | {', '.join(f'{t:,}' for t in b['train_tokens'])} | |"
              for b in d["baselines"]]
    verdict = "; ".join(f"{'beats' if d['beats'][m] else 'does not beat'} the {m} on the mean"
                        f"{' and in every seed' if d['beats_every_seed'][m] else ''}" for m in d["beats"])
    return "\n".join(lines + ["", f"The GPT {verdict}."])


def render(run: Path | None = None, notebook: Path | None = None) -> str:
    """Both measurements (the newest recorded unless given); without a notebook record, a line saying so.

    Raises:
        FileNotFoundError: no throughput run recorded (run ``bench/causal_vs_trainer.py``).
    """
    run = run or newest("causal_vs_trainer_*.json", missing=MISSING)
    notebook = notebook or newest("notebook06_*.json")
    tail = render_notebook(notebook) if notebook else (
        "Notebook 06's held-out perplexity beside the n-gram baselines at `cpu` is not recorded yet "
        "(`NBKIT_SCALE=cpu scripts/run_notebooks.sh --only 06`, then `scripts/causal_table.py record runs/cpu/causal`).")
    seeds = newest("causal_seeds_*.json")
    tail += "\n\n" + (render_seeds(seeds) if seeds else (
        "The same comparison over several seeds is not recorded yet (`bench/causal_seeds.py --scale cpu --seed N` "
        "for N = 0, 1, 2, then `--summary`)."))
    return render_throughput(run) + "\n\n" + tail


def headline(run: Path | None = None, seeds: Path | None = None) -> str:
    """The front page's line: the GPT's held-out perplexity over seeds beside the Kneser-Ney baselines, and the
    loop's speed against ``transformers.Trainer`` (raises as :func:`render`; without a seeds record, the speed alone).
    """
    d = json.loads(Path(run or newest("causal_vs_trainer_*.json", missing=MISSING)).read_text(encoding="utf-8"))
    speed = (f"nbkit's loop trains it at x{d['ratio_nbkit_over_trainer']['tokens_per_s']:.2f} the tokens/s of "
             f"`transformers.Trainer` ({d['device']}, {d['written_at'][:10]}).")
    seeds = seeds or newest("causal_seeds_*.json")
    if seeds is None:
        return speed[0].upper() + speed[1:]
    s = json.loads(Path(seeds).read_text(encoding="utf-8"))
    g = s["gpt_perplexity"]
    base = ", ".join(f"{b['model']} {b['eval_perplexity']['mean']:,.1f}" for b in s["baselines"])
    return (f"At `{s['scale']}`, GPT ({s['model']}) held-out perplexity **{g['mean']:,.1f}"
            + (f" ± {g['sd']:,.1f}" if g["sd"] is not None else "") + f"** over {s['n_seeds']} seeds "
            f"({s['train_s']['mean'] / 60:.1f} min of training each) beside {base} on the same tokens; " + speed)


def record(run_dir: Path, machine: str, wall_s: float | None = None, out: Path | None = None) -> Path:
    """``bench/results/notebook06_<scale>_<date>.json`` from a notebook-06 run folder (``metrics.json`` and
    ``baselines.json``): the comparison rows, steps, tokens/s, the config fields set away from the scale's."""
    sys.path.insert(0, str(ROOT))
    from nbkit import jsonio

    run_dir = Path(run_dir)
    m = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    b = json.loads((run_dir / "baselines.json").read_text(encoding="utf-8"))
    from nbkit.recipes.pretraining import PretrainConfig

    base = json.loads(jsonio.dumps(PretrainConfig.for_scale(m["scale"], objective="causal").to_dict()))  # as stored
    overrides = {k: v for k, v in m["config"].items() if base.get(k) != v and k not in ("progress",)}
    payload = {"scale": m["scale"], "overrides": overrides, "steps": m["steps"], "tokens_per_s": m["tokens_per_s"],
               "device": m["device"], "precision": m["precision"], "rows": b["rows"], "beats": b["beats"],
               "same_targets": b["same_targets"], "machine": machine, "wall_s": wall_s, "run_dir": str(run_dir),
               "written_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    out = out or ROOT / "bench" / "results" / f"notebook06_{m['scale']}_{time.strftime('%Y-%m-%d')}.json"
    jsonio.write_json(out, payload)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["record"]:
        import argparse

        ap = argparse.ArgumentParser(prog="causal_table.py record")
        ap.add_argument("run_dir")
        ap.add_argument("--machine", required=True)
        ap.add_argument("--wall-s", type=float, default=None)
        a = ap.parse_args(argv[1:])
        print(f"wrote {record(Path(a.run_dir), a.machine, a.wall_s)}")
        return 0
    return print_or_rewrite(argv, [(render(), FILES, START, END), (headline(), READMES, HEAD_START, HEAD_END)])


if __name__ == "__main__":
    sys.exit(main())
