"""The recorded pretraining-value benchmark (nbkit.evaluate.pretrain_value) and its report
(bench/pretrain_value_report.py) render as a headline, a table and a curve, from its own numbers."""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest
from _load import load_script

from nbkit.errors import DataError
from nbkit.evaluate import pretrain_value as pv

report = load_script(Path(__file__).resolve().parents[1] / "bench" / "pretrain_value_report.py")


def test_recorded_run_loads_and_rows_carry_its_numbers():
    stats = pv.load_recorded()
    rs = pv.rows(stats, "mean", 2.0)
    assert [r["init"] for r in rs][0] == "random" and rs[0]["gain"] is None
    best = max((r for r in rs if r["gain"] is not None), key=lambda r: r["tokens_m"])
    entry = next(e for e in stats["table"] if e["pooling"] == "mean" and e["epochs"] == 2.0
                 and e["pretrain_tokens"] == round(best["tokens_m"] * 1e6))
    assert best["gain"] == pytest.approx(100 * entry["test_accuracy_diff_vs_random"]["mean"])
    assert best["gain_low"] <= best["gain"] <= best["gain_high"]


def test_markdown_table_and_plot():
    stats = pv.load_recorded()
    table = report.markdown_table(stats)
    assert table.count("\n") == 1 + len(pv.rows(stats)) + len(stats["baseline"])
    assert "TF-IDF" in table and "[95 % CI]" in table
    ax = report.plot_gain(stats)
    assert ax.get_xlabel().startswith("MLM pretraining tokens")


def test_bad_file_is_a_data_error(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(DataError, match="not a bench/pretrain_value.py stats.json"):
        pv.load_recorded(tmp_path / "x.json")
    with pytest.raises(DataError, match="rerun"):
        pv.load_recorded(tmp_path / "missing.json")


def test_gpu_run_ships_and_its_headline_is_the_best_lower_bound():
    stats = pv.load_recorded(run="gpu")
    best = max((r for r in pv.rows(stats) if r["gain"] is not None), key=lambda r: r["gain_low"])
    line = pv.headline(stats)
    assert f"{best['gain']:+.1f} points [{best['gain_low']:+.1f}, {best['gain_high']:+.1f}]" in line
    assert stats["machine"] in line and "TF-IDF" in line
    assert f"seeds resampled too [{best['gain_seeds_low']:+.1f}, {best['gain_seeds_high']:+.1f}]" in line
    assert len(best["gain_per_seed"]) == best["seeds"]
    with pytest.raises(DataError, match="recorded runs are"):
        pv.load_recorded(run="tpu")
    no_pair = {**stats, "table": [e for e in stats["table"] if e["init"] != "random"]}
    for e in no_pair["table"]:
        e.pop("test_accuracy_diff_vs_random", None)
    with pytest.raises(DataError, match="no checkpoint row"):
        pv.headline(no_pair)


def test_aggregate_keeps_weighted_and_unweighted_runs_apart_and_pairs_each_with_its_own_random():
    y = [0, 1] * 10
    right, wrong = y, [1 - v for v in y]

    def row(init, seed, pred, cw=None):
        r = {"init": init, "lr": 5e-4, "epochs": 1, "pooling": "mean", "max_length": 64, "seed": seed,
             "finetune_s": 1.0, "test_pred": pred, "validation_accuracy": 0.5, "validation_macro_f1": 0.5,
             "test_accuracy": sum(p == t for p, t in zip(pred, y)) / len(y), "test_macro_f1": 0.5}
        return {**r, "class_weights": cw} if cw else r

    rows_ = [row("random", s, wrong) for s in (0, 1)] + [row("ck", s, right) for s in (0, 1)]
    rows_ += [row("random", s, right, "balanced") for s in (0, 1)] + [row("ck", s, right, "balanced") for s in (0, 1)]
    table = report.aggregate(rows_, {}, y)
    assert len(table) == 4  # two recipes x two inits, never pooled
    plain = next(e for e in table if e["init"] == "ck" and "class_weights" not in e)
    weighted = next(e for e in table if e["init"] == "ck" and e.get("class_weights") == "balanced")
    assert plain["test_accuracy_diff_vs_random"]["mean"] == pytest.approx(1.0)
    assert weighted["test_accuracy_diff_vs_random"]["mean"] == pytest.approx(0.0)
    assert weighted["test_accuracy_diff_vs_random"]["per_seed"] == [0.0, 0.0]


def test_headline_compares_with_random_and_tfidf_at_the_best_rows_own_cut():
    import copy

    stats = copy.deepcopy(pv.load_recorded(run="gpu"))
    longer = [{**copy.deepcopy(e), "max_length": 256} for e in stats["table"]]
    for e in longer:  # a second, worse recipe at another cut: must not lend its random arm or baseline
        e["test_accuracy"]["mean"] = 0.5
        if e.get("test_accuracy_diff_vs_random"):
            e["test_accuracy_diff_vs_random"].update(mean=-0.2, ci95=[-0.3, -0.1])
    stats["table"] += longer
    stats["baseline"]["256"] = {"test_accuracy": 0.999, "test_macro_f1": 0.999}
    line = pv.headline(stats)
    assert "vs 0.806 from random" in line and "TF-IDF at the same cut 0.840" in line
