"""bench/pretrain_value.py is the recipes plus overrides: its defaults are the cpu scale's configs, its phases
call the recipes and keep the recorded formats (pretrain.json, finetune.jsonl, stats.json)."""
import json
import sys
from pathlib import Path

import pytest
from _load import load_script

from nbkit.recipes.finetuning import FinetuneConfig
from nbkit.recipes.tokenizer import TokenizerConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    return load_script(ROOT / "bench" / "pretrain_value.py", "pretrain_value_bench")


def test_defaults_are_the_cpu_scales_recipes(bench):
    args = bench.parse_args(["report"])
    scale = "cpu"
    fc = FinetuneConfig.for_scale(scale)
    for flag, field in bench.FINETUNE_FLAGS.items():
        assert getattr(args, flag) == getattr(fc, field), flag
    pt = sys.modules["nbkit.recipes.pretraining"].PretrainConfig.for_scale(scale)
    for flag, field in bench.PRETRAIN_FLAGS.items():
        assert getattr(args, flag) == getattr(pt, field), flag
    assert int(args.save_steps.split(",")[-1]) == pt.max_steps and args.vocab_size == TokenizerConfig.for_scale(scale).vocab_size
    # what the flags build is the recipe itself: no value of the bench's own
    assert bench.finetune_config(args, None, 0) == fc.replace(eval_every=0, checkpoint_every=0, progress=False,
                                                              init="random")
    cfg, steps = bench.pretrain_config(args)
    assert cfg == pt.__class__.for_scale(scale, mix=(("reviews", 1.0),), max_steps=pt.max_steps)
    gpu = bench.parse_args(["report", "--scale", "gpu"])
    assert (gpu.max_length, gpu.model, gpu.block) == (128, "mini", 128)   # the gpu session's recipe


def test_pretrain_phase_runs_the_recipe_and_writes_the_recorded_format(bench, tmp_path, monkeypatch):
    seen = {}

    def fake_run(cfg, out_dir, *, tokenizer=None, callbacks=(), save_steps=()):
        seen.update(cfg=cfg, save_steps=tuple(save_steps))
        return {"checkpoints": {s: str(Path(out_dir) / "checkpoints" / f"step-{s:06d}") for s in (2, 4, 5)},
                "history": [{"step": 2, "eval_loss": 7.5}, {"step": 4, "loss": 7.0}]}

    monkeypatch.setattr(sys.modules["nbkit.recipes.pretraining"], "run_pretraining", fake_run)
    monkeypatch.setattr(bench, "get_tokenizer", lambda *a: "tok")
    monkeypatch.setattr(bench, "model_dir_at", lambda out, step: Path(out) / "checkpoints" / f"step-{step:06d}")
    args = bench.parse_args(["pretrain", "--out", str(tmp_path), "--save-steps", "4,2", "--mlm-lr", "0.002"])
    bench.pretrain(args)
    assert seen["save_steps"] == (2, 4) and seen["cfg"].max_steps == 4 and seen["cfg"].lr == 0.002
    meta = json.loads((tmp_path / "pretrain.json").read_text())
    assert meta["args"]["corpus"] == "reviews" and [c["step"] for c in meta["checkpoints"]] == [2, 4]
    assert meta["checkpoints"][0]["eval_loss"] == 7.5 and meta["checkpoints"][1]["eval_loss"] is None
    assert meta["checkpoints"][1]["train_tokens"] == 4 * seen["cfg"].batch_size * seen["cfg"].block_size


@pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier")
def test_finetune_and_report_phases_at_smoke(bench, tmp_path, monkeypatch):
    from nbkit import data, text

    rows = [{"text": f"{w}{i}号", "label": lab} for lab, w in (("pos", "很好满意"), ("neg", "太差失望")) for i in range(30)]
    f = tmp_path / "d.jsonl"
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    labeled = data.load_labeled_files(str(f), seed=0)
    tok = text.train_wordpiece(labeled.splits["train"]["text"], vocab_size=120, out_dir=tmp_path / "tok",
                               model_max_length=64)
    monkeypatch.setattr(bench, "labeled", lambda task: labeled)
    monkeypatch.setattr(bench, "get_tokenizer", lambda *a: tok)
    out = tmp_path / "pv"
    common = ["--scale", "smoke", "--out", str(out), "--ft-epochs", "0.5", "--max-length", "16"]
    bench.main(["finetune", "--init", "random", "--seeds", "0,1", *common])
    got = [json.loads(x) for x in (out / "finetune.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in got] == [0, 1] and all(r["max_length"] == 16 and r["epochs"] == 0.5 for r in got)
    assert len(got[0]["test_pred"]) == len(labeled.splits["test"]) and got[0]["lr"] == FinetuneConfig.for_scale("smoke").lr
    stats = bench.report(bench.parse_args(["report", *common]))
    assert stats["n_rows"] == 2 and stats["table"][0]["seeds"] == [0, 1] and "16" in stats["baseline"]
    assert json.loads((out / "stats.json").read_text())["table"] == stats["table"]


def test_tapt_phase_continues_the_published_model_and_pairs_the_seeds(bench, tmp_path, monkeypatch):
    from nbkit import data

    rows = [{"text": f"{w}{i}号", "label": lab} for lab, w in (("pos", "很好满意"), ("neg", "太差失望")) for i in range(30)]
    f = tmp_path / "d.jsonl"
    f.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    labeled = data.load_labeled_files(str(f), seed=0)
    y = labeled.splits["test"]["label"]
    seen = []

    def fake_run(cfg, out_dir, *, tokenizer=None, **kw):
        seen.append(cfg)
        return {"model_dir": str(Path(out_dir) / "model"), "steps": cfg.max_steps, "train_tokens": 1, "lr": cfg.lr,
                "eval_loss": 5.0, "untrained_eval_loss": 9.0, "tokens_per_s": 1.0}

    def fake_finetune(args):   # the continued model gets every test example right, the published one half
        with open(Path(args.out) / "finetune.jsonl", "a") as fh:
            for seed in (0, 1, 2):
                for init, pred in zip(args.init.split(","), ([1 - t if i % 2 else t for i, t in enumerate(y)], y)):
                    fh.write(json.dumps({"init": init, "seed": seed, "tag": args.tag, "test_pred": list(pred)}) + "\n")

    monkeypatch.setattr(sys.modules["nbkit.recipes.pretraining"], "run_pretraining", fake_run)
    monkeypatch.setattr(bench, "finetune", fake_finetune)
    monkeypatch.setattr(bench, "labeled", lambda task: labeled)
    monkeypatch.setattr(bench, "get_tokenizer", lambda *a: "tok")
    monkeypatch.setattr(bench.evaluate, "baseline_at_cut", lambda *a, **k: {"test_accuracy": 0.5})
    result = bench.tapt(bench.parse_args(["tapt", "--out", str(tmp_path / "pv"), "--published-steps", "8",
                                          "--tapt-steps", "4", "--tapt-lr", "0.0003"]))
    published, continued = seen
    assert published.init is None and published.mix == (("peoples_daily", 1.0),) and published.max_steps == 8
    assert continued.init == str(tmp_path / "pv" / "published" / "model") and continued.mix == (("reviews", 1.0),)
    assert continued.lr == 0.0003 and continued.max_steps == 4
    d = result["test_accuracy_diff_tapt_vs_published"]
    assert result["seeds"] == [0, 1, 2] and d["mean"] == pytest.approx(len(y[1::2]) / len(y)) and "ci95_seeds" in d
    assert json.loads((tmp_path / "pv" / "tapt.json").read_text())["runs"]["tapt"]["test_accuracy"]["mean"] == 1.0
