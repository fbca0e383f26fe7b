"""What pretraining buys, from a recorded ``bench/pretrain_value.py`` run: its rows and a headline.

The recorded ``stats.json`` files ship in ``notebooks/data/``.
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
