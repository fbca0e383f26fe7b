"""``bench/pretrain_value.py``'s report: the table it aggregates from its fine-tuning rows, the README's markdown
table (``scripts/expect_table.py``) and the gain curve (docs/pretraining.md), over a recorded ``stats.json``
(:func:`nbkit.evaluate.pretrain_value.load_recorded`).

Import it from a checkout's root: ``from bench.pretrain_value_report import markdown_table``.
"""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout

from nbkit.evaluate.pretrain_value import rows  # noqa: E402


def aggregate(finetune_rows: list[dict], checkpoints: dict, y_test, metrics=("accuracy",)) -> list[dict]:
    """The benchmark's table: fine-tune rows (``init``, ``lr``, ``epochs``, ``pooling``, ``max_length``,
    ``seed``, ``finetune_s``, scores, ``test_pred`` (N,)) grouped by recipe, seeds summarised.

    ``checkpoints``: dir -> ``step``, ``train_tokens``, ``wall_s``, ``eval_loss``; ``y_test``: (N,) labels.
    Each metric gets ``{"mean", "std" (ddof=1; 0 for one seed), "values"}``, and for ``metrics``
    ``test_<metric>_diff_vs_random``: the paired bootstrap against random init of the same recipe.
    """
    import numpy as np

    from nbkit.evaluate.stats import accuracy, bootstrap_diff, bootstrap_diff_seeds, macro_f1

    scorers = {"accuracy": accuracy, "macro_f1": macro_f1}
    groups: dict = {}
    for r in finetune_rows:  # a recipe: also its loss weighting (weighted and unweighted runs never pool)
        key = (r["init"], r["lr"], r["epochs"], r["pooling"], r["max_length"], r.get("class_weights"))
        groups.setdefault(key, []).append(r)
    random_key = {k[2:]: k for k in groups if k[0] == "random"}
    table = []
    for key, rs in groups.items():
        init, lr, epochs, pooling, max_length, class_weights = key
        rs = sorted(rs, key=lambda r: r["seed"])
        c = checkpoints.get(init, {})
        entry = {"init": init, "lr": lr, "epochs": epochs, "pooling": pooling, "max_length": max_length,
                 **({"class_weights": class_weights} if class_weights else {}), "seeds": [r["seed"] for r in rs], "pretrain_steps": c.get("step", 0),
                 "pretrain_tokens": c.get("train_tokens", 0), "pretrain_min": c.get("wall_s", 0.0) / 60,
                 "pretrain_eval_loss": c.get("eval_loss"),
                 "finetune_min_mean": float(np.mean([r["finetune_s"] for r in rs])) / 60}
        for m in ("validation_accuracy", "validation_macro_f1", "test_accuracy", "test_macro_f1"):
            v = [r[m] for r in rs]
            entry[m] = {"mean": float(np.mean(v)), "std": float(np.std(v, ddof=1)) if len(v) > 1 else 0.0,
                        "values": v}
        rk = random_key.get(key[2:])
        if init != "random" and rk is not None:
            base_rows = {r["seed"]: r for r in groups[rk]}
            common = [r for r in rs if r["seed"] in base_rows]
            pred = [r["test_pred"] for r in common]                      # (S, N), paired by seed with base
            base = [base_rows[r["seed"]]["test_pred"] for r in common]
            for m in metrics if common else ():
                d = bootstrap_diff(y_test, pred, base, metric=scorers[m])
                entry[f"test_{m}_diff_vs_random"] = {"mean": d["value"], "ci95": [d["low"], d["high"]],
                                                     "random_lr": rk[1], "paired_seeds": [r["seed"] for r in common]}
                if len(common) >= 2:  # seeds resampled too: covers seed-to-seed variance
                    ds = bootstrap_diff_seeds(y_test, pred, base, metric=scorers[m])
                    entry[f"test_{m}_diff_vs_random"].update(ci95_seeds=[ds["low"], ds["high"]],
                                                             per_seed=ds["per_seed"])
        table.append(entry)
    table.sort(key=lambda e: (e["max_length"], e["pooling"], e["epochs"], e["pretrain_tokens"], e["init"], e["lr"]))
    return table


def markdown_table(stats: dict, pooling: str = "mean") -> str:
    """The README's markdown table: a line per initialisation and epoch count, and the TF-IDF rows."""
    lines = ["| init | fine-tune epochs | pretraining tokens | pretraining wall (recorded) | held-out MLM loss "
             "| test accuracy (mean ± std, seeds) | test macro-F1 | Δ test vs random init [95 % CI] |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows(stats, pooling):
        lr = "" if r["lr"] == 5e-4 else f" (lr {r['lr']:g})"
        gain = f"{r['gain']:+.1f} [{r['gain_low']:+.1f}, {r['gain_high']:+.1f}] points" if r["gain"] is not None else "-"
        if r.get("gain_seeds_low") is not None:
            gain += f"; seeds resampled too [{r['gain_seeds_low']:+.1f}, {r['gain_seeds_high']:+.1f}]"
        loss = f"{r['mlm_loss']:.2f}" if r["mlm_loss"] is not None else "-"
        tokens = f"{r['tokens_m']:.1f} M" if r["tokens_m"] else "0"
        wall = f"{r['pretrain_min']:.1f} min" if r["tokens_m"] else "-"
        acc = f"{r['test_acc']:.3f} ± {r['test_acc_std']:.3f}" if r["seeds"] > 1 else f"{r['test_acc']:.3f}"
        lines.append(f"| {r['init']}{lr} | {r['epochs']:g} | {tokens} | {wall} | {loss} | "
                     f"{acc} ({r['seeds']}) | {r['test_f1']:.3f} | {gain} |")
    for ml, b in stats["baseline"].items():
        lines.append(f"| TF-IDF char 1-3-gram + LR, text cut at {ml} tokens | - | - | - | - | "
                     f"{b['test_accuracy']:.3f} | {b['test_macro_f1']:.3f} | - |")
    return "\n".join(lines)


def plot_gain(stats: dict, ax=None, pooling: str = "mean", goal: float = 2.0):
    """Test-accuracy gain over random init (points, 95 % CI bars) against pretraining tokens; returns the Axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for epochs in sorted({r["epochs"] for r in rows(stats, pooling)}):
        pts = [r for r in rows(stats, pooling, epochs) if r["gain"] is not None and r["lr"] == 5e-4]
        if not pts:
            continue
        x = [r["tokens_m"] for r in pts]
        y = [r["gain"] for r in pts]
        err = [[g - r["gain_low"] for g, r in zip(y, pts)], [r["gain_high"] - g for g, r in zip(y, pts)]]
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, label=f"fine-tune {epochs:g} epoch(s)")
    ax.axhline(0, color="grey", lw=1)
    ax.axhline(goal, color="tab:green", ls="--", lw=1, label=f"goal +{goal:g} points")
    ax.set_xlabel("MLM pretraining tokens (millions)")
    ax.set_ylabel("test accuracy gain (points)")
    ax.set_title("fine-tuning from the checkpoint vs random init")
    ax.legend(fontsize=8)
    return ax
