"""LoRA as an option of the fine-tuning recipe (FinetuneConfig.lora): the fields, a sentiment and an NER run at
smoke size, both exports, what trains, and the refusal to resume across full fine-tuning and LoRA."""
import json

import pytest
import torch
from _ner_items import fake_ner

from nbkit.errors import CheckpointError, ConfigError
from nbkit.recipes import finetuning as ft
from nbkit.recipes.finetuning import FinetuneConfig

QUIET = pytest.mark.filterwarnings("ignore:class .* has recall 0", "ignore:degenerate classifier",
                                 "ignore:resuming from .* with settings that differ")


# ----- config ----------------------------------------------------------------------------------------------------
def test_lora_is_off_by_default_and_its_fields_are_unused_then():
    cfg = FinetuneConfig.for_scale("cpu")
    assert cfg.lora is False and ft.peak_lr(cfg) == cfg.lr and ft.lora_settings(cfg) is None
    assert {"lora_r", "lora_lr", "lora_export"} <= set(cfg.unused()) and cfg.run_tag() == ""
    assert cfg.replace(lora_r=4).run_tag() == ""                      # unused without lora: same folder
    assert ft.train_config(cfg, 13_000).lr == cfg.lr


def test_the_rate_under_lora_is_ten_times_lr_at_most_2e3_and_the_table_says_so():
    cfg = FinetuneConfig.for_scale("cpu", lora=True)
    assert cfg.lora_lr is None and ft.peak_lr(cfg) == ft.LORA_LR_CAP.value == 2e-3     # not 10 x 5e-4: that stays at chance
    assert ft.train_config(cfg, 13_000).lr == 2e-3
    table = cfg.table()
    assert table.loc["lora_lr", "from"].startswith("recipe: None, so min(10 x lr, 0.002) = 0.002: ") and "Hu et al" in \
        table.loc["lora_lr", "from"]
    assert "unused" not in table.loc["lora_r", "from"] and cfg.run_tag() == "-loraTrue"
    own = cfg.replace(lora_lr=1e-3)
    assert ft.peak_lr(own) == 1e-3 and "lora_lr is the rate" in own.unused()["lr"]
    assert ft.peak_lr(cfg.replace(lr=2e-5)) == pytest.approx(2e-4)   # follows lr (a BERT-base encoder's)


def test_targets_take_a_name_or_a_list_and_export_takes_three_values():
    assert FinetuneConfig.for_scale("smoke", lora=True, lora_targets="query").lora_targets == ("query",)
    cfg = FinetuneConfig.for_scale("smoke", lora=True, lora_targets=["query", "value"])
    assert cfg.lora_targets == ("query", "value") and cfg.run_tag() == "-loraTrue-lora_targetsqueryxvalue"
    assert ft.lora_settings(cfg) == {"r": 8, "alpha": 16, "dropout": 0.05, "targets": ["query", "value"]}
    with pytest.raises(ConfigError, match="lora_export='merge': use one of 'merged', 'adapter', 'both'"):
        FinetuneConfig.for_scale("smoke", lora=True, lora_export="merge")


def test_the_job_takes_every_lora_field_as_a_flag():
    from nbkit.jobs import finetune as job

    a = job.parser().parse_args(["--scale", "smoke", "--lora", "yes", "--lora-r", "4", "--lora-alpha", "8",
                                 "--lora-dropout", "0", "--lora-targets", "query", "value", "--lora-lr", "2e-3",
                                 "--lora-export", "both"])
    cfg, _ = job.config(a)
    assert (cfg.lora, cfg.lora_r, cfg.lora_alpha, cfg.lora_dropout, cfg.lora_targets, cfg.lora_lr,
            cfg.lora_export) == (True, 4, 8.0, 0.0, ("query", "value"), 2e-3, "both")
    one, _ = job.config(job.parser().parse_args(["--scale", "smoke", "--lora", "yes", "--lora-targets", "query"]))
    assert one.lora_targets == ("query",)


# ----- sentiment -------------------------------------------------------------------------------------------------
def _lora_cfg(**kw):
    return FinetuneConfig.for_scale("smoke", task="own", max_length=16, batch_size=8, max_steps=6, progress=False,
                                    eval_every=0, checkpoint_every=3, report_to="none", init="random", lora=True,
                                    lora_r=4, **kw)


def _is_adapter_or_head(name: str) -> bool:
    return "lora_" in name or "modules_to_save" in name


@QUIET
def test_a_sentiment_run_trains_only_adapters_and_head_and_exports_both_ways(tiny_task, tmp_path, capsys):
    from peft import PeftModel
    from transformers import pipeline

    from nbkit.evaluate.inference import predict

    labeled, tok = tiny_task
    cfg = _lora_cfg(lora_export="both")
    encoded, trunc = ft.encode(cfg, tok, labeled)
    run = tmp_path / "run"
    clf, how = ft.model(cfg, tok, labeled, run)
    assert "trains" in capsys.readouterr().out and hasattr(clf, "merge_and_unload")
    before = {n: p.detach().clone() for n, p in clf.named_parameters()}
    loop, result = ft.train(cfg, clf, tok, encoded, run)
    assert loop.optimizer.param_groups[0]["initial_lr"] == ft.peak_lr(cfg) == 2e-3      # smoke lr 1e-3
    changed = {n for n, p in clf.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(_is_adapter_or_head(n) for n in changed), sorted(changed)[:5]
    assert any("lora_B" in n for n in changed) and any("modules_to_save" in n for n in changed)
    assert {n for n, p in clf.named_parameters() if p.requires_grad} >= changed

    scores = ft.evaluate(cfg, loop.model, tok, labeled)
    summary = ft.save(cfg, run, loop, result, labeled, trunc, scores, how)
    n = summary["trainable_parameters"]
    assert 0 < n["trainable"] < n["total"] and n["share"] == pytest.approx(n["trainable"] / n["total"])
    assert summary["lora"] == {"r": 4, "alpha": 16, "dropout": 0.05, "targets": None, "lr": 2e-3, "export": "both"}
    assert json.loads((run / "metrics.json").read_text())["trainable_parameters"] == n

    with pytest.raises(ConfigError, match="inside a peft model"):          # loop.model holds the adapters unmerged
        ft.export(cfg, loop.model, tok, labeled, tmp_path / "wrong")
    out = ft.export(cfg, clf, tok, labeled, tmp_path / "model")
    texts = list(labeled.splits["test"]["text"])
    want = predict(clf, tok, texts, max_length=cfg.max_length, id2label=labeled.id2label)
    # mean pooling (a random encoder's) ships its pooling code: trust_remote_code, as every mean-pooled export
    served = pipeline("text-classification", model=str(out), trust_remote_code=True, device="cpu")(texts)
    assert [labeled.id2label[int(i)] for i in want["label"]] == [r["label"] for r in served]
    assert [r["score"] for r in served] == pytest.approx(list(want["prob"]), abs=1e-5)
    base, _ = ft.model(cfg.replace(lora=False), tok, labeled)       # the classifier LoRA wrapped, rebuilt
    reloaded = PeftModel.from_pretrained(base, out / "adapter").eval()
    batch = tok(texts[:4], padding=True, return_tensors="pt")
    clf.eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).logits, clf(**batch).logits)


@QUIET
def test_lora_settings_are_part_of_what_a_run_resumes(tiny_task, tmp_path):
    labeled, tok = tiny_task
    full = _lora_cfg().replace(lora=False)
    run = tmp_path / "run"
    ft.run_finetuning(full, run, labeled=labeled, tokenizer=tok)          # full fine-tuning, checkpoints kept
    lora = _lora_cfg()
    with pytest.raises(ConfigError, match=r"trained from .* this run starts from .*'lora': \{'r': 4"):
        ft.model(lora, tok, labeled, out_dir=run)
    # the loop's own check, where model() was not told the folder (notebook 05 calls it so)
    encoded, _ = ft.encode(lora, tok, labeled)
    clf, _ = ft.model(lora, tok, labeled)
    with pytest.raises(CheckpointError, match=r"lora: checkpoint None vs this run \{'r': 4"):
        ft.train(lora, clf, tok, encoded, run)
    other = tmp_path / "other"
    ft.run_finetuning(lora, other, labeled=labeled, tokenizer=tok)
    with pytest.raises(ConfigError, match=r"'r': 4.* this run starts from .*'r': 8"):
        ft.model(lora.replace(lora_r=8), tok, labeled, out_dir=other)
    again = ft.run_finetuning(lora.replace(max_steps=7), other, labeled=labeled, tokenizer=tok)   # same: resumes
    assert again["train"]["steps"] == 7


@QUIET
def test_the_job_runs_lora_and_names_both_exports(tiny_task, tmp_path, monkeypatch, capsys):
    from nbkit.jobs import finetune as job
    from nbkit.recipes import tokenizer as tk

    labeled, tok = tiny_task
    monkeypatch.setattr(ft, "data", lambda cfg: labeled)
    monkeypatch.setattr(tk, "load", lambda scale: tok)
    monkeypatch.setattr(ft, "default_encoder", lambda scale: None)
    assert job.main(["--scale", "smoke", "--output-dir", str(tmp_path), "--max-steps", "2", "--batch-size", "4",
                     "--report-to", "none", "--lora", "yes", "--lora-r", "2", "--lora-export", "adapter",
                     "--export"]) == 0
    printed = capsys.readouterr().out
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["config"]["lora"] is True and m["lora"]["r"] == 2 and m["trainable_parameters"]["share"] < 1
    assert (tmp_path / "model" / "adapter" / "adapter_config.json").is_file()
    assert not (tmp_path / "model" / "config.json").exists()             # adapter only: no merged model
    assert "LoRA adapter:" in printed and "exported model" not in printed


# ----- named entities --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_an_ner_run_with_lora_exports_a_tagger_that_tags_as_the_peft_model(tmp_path):
    pytest.importorskip("nbkit.evaluate.ner")
    from transformers import AutoTokenizer, pipeline

    from nbkit.models.standin import build_standin

    standin = build_standin(tmp_path / "bert")
    labeled = fake_ner(n_train=48, n_eval=8)
    cfg = FinetuneConfig.for_scale("smoke", task="ner", init=str(standin), max_length=16, stride=4, batch_size=8,
                                   max_steps=6, eval_every=0, checkpoint_every=0, progress=False, report_to="none",
                                   n_boot=10, lora=True, lora_export="both")
    tok = AutoTokenizer.from_pretrained(str(standin))
    encoded, _ = ft.encode(cfg, tok, labeled)
    clf, _ = ft.model(cfg, tok, labeled)
    before = {n: p.detach().clone() for n, p in clf.named_parameters()}
    loop, _ = ft.train(cfg, clf, tok, encoded)
    changed = {n for n, p in clf.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(_is_adapter_or_head(n) for n in changed), sorted(changed)[:5]
    scores = ft.evaluate(cfg, loop.model, tok, labeled, out_dir=tmp_path / "run")
    assert 0 <= scores["report"]["f1"] <= 1

    out = ft.export(cfg, clf, tok, labeled, tmp_path / "model")
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForTokenClassification"]
    assert (out / "adapter" / "adapter_config.json").is_file()
    from transformers import AutoModelForTokenClassification

    from nbkit.evaluate.inference import predict_tags

    merged = AutoModelForTokenClassification.from_pretrained(out)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    tags, _ = predict_tags(merged, tok, labeled.splits["test"], dict(enumerate(labeled.labels)), cfg.max_length,
                           cfg.stride)
    assert tags == scores["pred"]                                         # the peft model's tags, windows and all
    assert any(t != "O" for sentence in tags for t in sentence)           # not the all-O tagger, trivially equal
    texts = ["".join(it["tokens"]) for it in labeled.splits["test"]]
    served = pipeline("token-classification", model=str(out), aggregation_strategy="first", device="cpu")(texts)
    assert len(served) == len(texts) and all(e["entity_group"] in labeled.types for r in served for e in r)
    batch = tok(texts[:4], padding=True, return_tensors="pt")
    clf.eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(**batch).logits, clf(**batch).logits, rtol=1e-5, atol=1e-5)
