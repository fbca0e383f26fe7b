"""What pretraining buys, from a recorded ``bench/pretrain_value.py`` run: the table, a headline, a curve.

The recorded ``stats.json`` files ship in ``notebooks/data/`` so notebooks and README show measured
numbers without rerunning the benchmark.
"""
from __future__ import annotations

import json
from pathlib import Path

from nbkit.errors import DataError

RECORDED = {"cpu": "data/pretrain_value.json",      # relative to the notebooks folder: 2-core CPU
            "gpu": "data/pretrain_value_gpu.json"}  # one H200, the gpu preset's recipe


def load_recorded(path: str | Path | None = None, run: str = "cpu") -> dict:
    """A recorded ``stats.json``: ``path``, else the shipped ``run`` (``"cpu"`` or ``"gpu"``).

    Raises:
        DataError: the file is missing or not a ``pretrain_value`` stats file, or ``run`` is unknown.
    """
    if path is None:
        from nbkit.runs import notebooks_dir

        if run not in RECORDED:
            raise DataError(f"run={run!r}: the recorded runs are {', '.join(RECORDED)}")
        path = notebooks_dir() / RECORDED[run]
    path = Path(path)
    try:
        stats = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read the recorded benchmark {path}: {exc}; rerun "
                        "`python bench/pretrain_value.py all --out DIR` and copy DIR/stats.json there") from exc
    if "table" not in stats or "baseline" not in stats:
        raise DataError(f"{path} is not a bench/pretrain_value.py stats.json (no 'table'/'baseline')")
    return stats


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


def rows(stats: dict, pooling: str = "mean", epochs: float | None = None) -> list[dict]:
    """One dict per initialisation of a ``pooling`` (and ``epochs``; None: all), sorted by tokens: ``init``,
    ``epochs``, ``lr``, ``max_length`` (tokens), ``tokens_m`` (millions), ``pretrain_min`` (minutes),
    ``mlm_loss`` (nats), ``test_acc``/``test_acc_std``, ``test_f1``, ``gain``/``gain_low``/``gain_high``
    (accuracy points over random init, 95 % CI), ``gain_seeds_low``/``gain_seeds_high`` and
    ``gain_per_seed`` (points; None where not recorded)."""
    out = []
    for e in stats["table"]:
        if e["pooling"] != pooling or (epochs is not None and e["epochs"] != epochs):
            continue
        d = e.get("test_accuracy_diff_vs_random")
        out.append({"init": "random" if e["init"] == "random" else "/".join(Path(e["init"]).parts[-2:]),
                    "epochs": e["epochs"], "lr": e["lr"], "max_length": e["max_length"], "tokens_m": e["pretrain_tokens"] / 1e6,
                    "pretrain_min": e["pretrain_min"], "mlm_loss": e["pretrain_eval_loss"],
                    "test_acc": e["test_accuracy"]["mean"], "test_acc_std": e["test_accuracy"]["std"],
                    "test_f1": e["test_macro_f1"]["mean"], "seeds": len(e["seeds"]),
                    "gain": 100 * d["mean"] if d else None,
                    "gain_low": 100 * d["ci95"][0] if d else None, "gain_high": 100 * d["ci95"][1] if d else None,
                    "gain_seeds_low": 100 * d["ci95_seeds"][0] if d and "ci95_seeds" in d else None,
                    "gain_seeds_high": 100 * d["ci95_seeds"][1] if d and "ci95_seeds" in d else None,
                    "gain_per_seed": [100 * x for x in d["per_seed"]] if d and "per_seed" in d else None})
    return sorted(out, key=lambda r: (r["epochs"], r["tokens_m"], r["init"]))


def _seed_part(r: dict) -> str:
    """``"; per seed +4.4/+1.4/+2.1, seeds resampled too [+1.4, +4.4]"``, or ``""``."""
    if r.get("gain_per_seed") is None or r.get("gain_seeds_low") is None:
        return ""
    per = "/".join(f"{x:+.1f}" for x in r["gain_per_seed"])
    return f"; per seed {per}, seeds resampled too [{r['gain_seeds_low']:+.1f}, {r['gain_seeds_high']:+.1f}]"


def headline(stats: dict, pooling: str = "mean", machine: str = "the recorded machine") -> str:
    """One line: the checkpoint whose gain over random init has the highest lower 95 % bound, and TF-IDF.

    Raises:
        DataError: no pretrained row has a gain (no paired random-init run).
    """
    best = max((r for r in rows(stats, pooling) if r["gain"] is not None), key=lambda r: r["gain_low"], default=None)
    if best is None:
        raise DataError("no checkpoint row with a paired random-init run in this stats file")
    rand = [r for r in rows(stats, pooling, best["epochs"])
            if r["init"] == "random" and r["max_length"] == best["max_length"]]
    base = stats["baseline"].get(str(best["max_length"]), {})  # TF-IDF at the best row's own cut
    where = stats.get("machine") or machine
    return (f"{where}: after {best['tokens_m']:.1f} M pretraining tokens ({best['pretrain_min']:.1f} min), test accuracy "
            f"{best['test_acc']:.3f} vs {rand[0]['test_acc']:.3f} from random weights: {best['gain']:+.1f} points "
            f"[{best['gain_low']:+.1f}, {best['gain_high']:+.1f}] ({best['seeds']} seeds{_seed_part(best)}); "
            "TF-IDF at the same cut "
            f"{base.get('test_accuracy', float('nan')):.3f}.")


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
