"""nbkit.recipes.pretraining: the config's defaults per scale, overrides, and each stage at smoke."""
import dataclasses
import json
from pathlib import Path

import pytest
from _load import load_script

from nbkit.errors import CheckpointError, ConfigError
from nbkit.recipes.pretraining import PretrainConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["smoke", "cpu", "gpu"], ids=lambda n: f"scale_{n.upper()}")  # "gpu" would skip
def test_the_recipe_constants_are_unchanged(name):
    cfg = PretrainConfig.for_scale(name)
    assert (cfg.warmup_ratio, cfg.scheduler, cfg.mlm_probability, cfg.keep_last, cfg.checkpoint_every, cfg.lr) == (
        0.06, "linear", 0.15, 2, None, 1e-3)
    assert cfg.overrides() == {} and cfg.run_tag() == ""


def test_overrides_none_all_and_unknown_fields():
    cfg = PretrainConfig.for_scale("cpu", lr=2e-3, seed=None, corpus_lines="all", mix=[["reviews", 1.0]])
    assert cfg.lr == 2e-3 and cfg.seed == 0 and cfg.corpus_lines is None and cfg.mix == (("reviews", 1.0),)
    assert cfg.overrides() == {"lr": 2e-3} and cfg.run_tag() == "-lr0.002"
    assert cfg.table().loc["lr", "from"] == "override" and cfg.table().loc["model", "from"] == "scale cpu"
    assert cfg.table().loc["warmup_ratio", "from"].startswith("recipe: 6 %") and "lr" in repr(cfg)
    assert cfg.replace(progress=False).run_tag() == "-lr0.002"          # no effect on the result: no new folder
    # the table marks what a corpus makes irrelevant (a fresh user read "mix: peoples_daily, reviews" beside a store)
    assert cfg.table().loc["fit_to_corpus", "from"] == "recipe; unused: no corpus"
    store = cfg.replace(corpus="runs/corpus/wiki").table()
    assert {f for f in store.index if "unused: corpus is set" in store.loc[f, "from"]} == {
        "mix", "corpus_lines", "max_train", "split_seed", "eval_fraction"}
    assert store.loc["lr", "from"] == "override" and "unused" not in store.loc["fit_to_corpus", "from"]
    with pytest.raises(ConfigError, match=r"learning_rate: not a PretrainConfig field; the fields are .*\blr\b"):
        PretrainConfig.for_scale("cpu", learning_rate=1e-3)
    with pytest.raises(ConfigError, match="not a scale"):
        PretrainConfig.for_scale("laptop")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0


def test_train_config_caps_passes_and_keeps_save_steps(tmp_path):
    from nbkit.recipes.pretraining import train_config

    cpu = PretrainConfig.for_scale("cpu")
    full = train_config(cpu, tmp_path)
    assert (full.max_steps, full.eval_every, full.checkpoint_every, full.keep_last) == (1000, 250, 250, 2)
    assert (full.warmup_ratio, full.scheduler, full.lr, full.batch_size) == (0.06, "linear", 1e-3, 64)
    assert full.eval_batches == 64                                    # 4,096 held-out blocks / 64 per batch
    assert train_config(cpu.replace(eval_blocks="all"), tmp_path).eval_batches is None
    assert train_config(cpu.replace(eval_blocks=100), tmp_path).eval_batches == 2  # rounded up
    small = train_config(cpu.replace(max_passes=10), tmp_path, n_blocks=320)     # 320 blocks / 64 per step x 10
    assert small.max_steps == 50 and small.eval_every == 12
    assert train_config(cpu.replace(max_passes=10), tmp_path, n_blocks=10**6).max_steps == 1000  # steps cap too
    kept = train_config(cpu, tmp_path, save_steps=(300, 600, 1000))
    assert kept.keep_steps == (300, 600, 1000) and kept.keep_last == 1 and kept.checkpoint_every == 250
    with pytest.raises(ConfigError, match=r"save_steps \[1200\] outside 1..1000"):
        train_config(cpu, tmp_path, save_steps=(500, 1200))


@pytest.mark.slow  # a few tiny runs
@pytest.mark.filterwarnings("ignore:checkpoint at step 6 >= max_steps")
def test_stages_and_run_pretraining_at_smoke(tmp_path, runs_tmp):
    from transformers import AutoModelForMaskedLM

    from nbkit.models.bert import build_classifier
    from nbkit.recipes import pretraining as pt

    cfg = PretrainConfig.for_scale("smoke", max_steps=6, eval_every=3, log_every=1, progress=False)
    corpus = pt.data(cfg)
    assert corpus.store is None and "reviews" in corpus.report.index and "peoples_daily" in corpus.report.index
    tok = pt.tokenizer(cfg, corpus)
    assert pt.size(cfg, corpus) == (cfg, None)
    data = pt.blocks(cfg, tok, corpus)
    assert len(data["train"][0]["input_ids"]) == cfg.block_size and "word_ids" in data["train"].column_names
    batch = pt.collator(cfg, tok)([data["train"][i] for i in range(4)])
    assert batch["labels"].shape == (4, cfg.block_size) and (batch["labels"] != -100).any()

    out = tmp_path / "mlm"
    metrics = pt.run_pretraining(cfg, out, tokenizer=tok, save_steps=(2, 4))
    assert sorted(metrics["checkpoints"]) == [2, 4, 6]                   # the save steps and the newest
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-000002", "step-000004", "step-000006"]
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["steps"] == 6 and saved["config"]["max_steps"] == 6 and saved["untrained_eval_loss"] > 0
    assert [h["step"] for h in saved["history"] if "eval_loss" in h] == [3, 6]
    bench = load_script(ROOT / "bench" / "pretrain_value.py", "pretrain_value_bench")   # its model_dir_at: the folder of a kept checkpoint, refused when not kept
    assert bench.model_dir_at(out, 4) == out / "checkpoints" / "step-000004" / "model"
    assert str(bench.model_dir_at(out, 4)) == metrics["checkpoints"][4]
    AutoModelForMaskedLM.from_pretrained(bench.model_dir_at(out, 2))
    clf, how = build_classifier(metrics["checkpoints"][2], num_labels=2, id2label={0: "neg", 1: "pos"}, tokenizer=tok)
    assert clf.config.num_labels == 2
    with pytest.raises(CheckpointError, match=r"no checkpoint at step 5.*kept: \[2, 4, 6\]"):
        bench.model_dir_at(out, 5)
    # the same config again resumes the finished run: nothing more to train, same checkpoints
    again = pt.run_pretraining(cfg, out, tokenizer=tok, save_steps=(2, 4))
    assert again["steps"] == 6 and sorted(again["checkpoints"]) == [2, 4, 6]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:the trained vocabulary has")
def test_own_texts_and_labeled_data_through_the_stages(tmp_path, runs_tmp):
    """Notebook 05's path: the user's corpus + labelled training texts, steps capped by passes."""
    from nbkit import text
    from nbkit.data.labeled import build_labeled_data
    from nbkit.recipes import pretraining as pt

    rows = [(f"评论{i}号，{'很好很满意' if i % 2 else '太差了失望'}", i % 2) for i in range(80)]
    labeled = build_labeled_data({"train": ([t for t, _ in rows], [y for _, y in rows])}, seed=0)
    own = [f"没有标签的第{i}段文字，讲了一件事情。" for i in range(60)] + [labeled.splits["test"]["text"][0]]
    cfg = PretrainConfig.for_scale("smoke", mix=(("own", 1.0), ("reviews", 1.0)), max_passes=2, resume=False,
                                   progress=False)
    corpus = pt.data(cfg, labeled=labeled, texts=own)
    table = corpus.report
    assert table.loc["own", "n_excluded"] == 1 and table.loc["reviews", "n_kept"] == len(labeled.splits["train"])
    tok = text.train_wordpiece(list(corpus.splits["train"]["text"]), vocab_size=300, out_dir=tmp_path / "tok",
                               model_max_length=64)
    data_ = pt.blocks(cfg, tok, corpus)
    lp, result = pt.train(cfg, pt.model(cfg, tok), tok, data_, tmp_path / "mlm")
    assert lp.config.max_steps < cfg.max_steps                        # 2 passes over a tiny corpus
    summary = pt.save(cfg, tmp_path / "mlm", lp, result, tok)
    assert summary["steps"] == lp.config.max_steps and (tmp_path / "mlm" / "model" / "config.json").is_file()
